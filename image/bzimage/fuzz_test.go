package bzimage

import (
	"bytes"
	"testing"
)

func FuzzParseSetupHeader(f *testing.F) {
	f.Add(makeBzImage(gzipPayload(f, []byte("vmlinux")), 1))
	f.Add(makeBzImage([]byte("\xfd7zXZ\x00\x00\x01"), 0))
	f.Add([]byte{})
	f.Add(make([]byte, 0x250))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ParseSetupHeader(b)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if in.PayloadEnd() > int64(len(b)) || in.PayloadStart() < 512 || in.SetupSects < 1 {
			t.Fatalf("accepted out-of-bounds header %+v for %d bytes", in, len(b))
		}
		if !bytes.Equal(b[0x202:0x206], []byte("HdrS")) {
			t.Fatal("accepted without HdrS")
		}
	})
}

func FuzzDecodeBCJx86(f *testing.F) {
	f.Add(elfish(4096, 5), uint32(0))
	f.Add([]byte{0xe8, 0xe8, 0xe9, 0x00, 0xff, 0xe8, 0xff, 0x00, 0xe8, 0, 0, 0, 0}, uint32(0xfffffffb))
	f.Add([]byte{0xe8, 0xf5, 0xff, 0xff, 0xff}, uint32(1))
	f.Fuzz(func(t *testing.T, b []byte, start uint32) {
		// The filter is a bijection: decode(encode(x)) == x and
		// encode(decode(x)) == x, and lengths never change.
		enc := bytes.Clone(b)
		bcjX86(enc, start, true)
		DecodeBCJx86(enc, start)
		if !bytes.Equal(enc, b) {
			t.Fatalf("decode(encode(x)) != x, first diff at %d", firstDiff(enc, b))
		}
		dec := bytes.Clone(b)
		DecodeBCJx86(dec, start)
		bcjX86(dec, start, true)
		if !bytes.Equal(dec, b) {
			t.Fatalf("encode(decode(x)) != x, first diff at %d", firstDiff(dec, b))
		}
	})
}

func FuzzDecompress(f *testing.F) {
	old := maxOutput
	maxOutput = 4 << 20 // keep allocations small whatever the input claims
	f.Cleanup(func() { maxOutput = old })
	data := elfish(512, 7)
	f.Add(makeBzImage(goXZPayload(f, data), 1))
	f.Add(makeBzImage(gzipPayload(f, data), 1))
	f.Add(makeBzImage(zstdPayload(f, data), 1))
	f.Add(makeBzImage(appendTrailer(lz4LegacyPayload(f, data, 256), len(data)), 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := Decompress("vmlinuz", b)
		if err != nil {
			if out != nil {
				t.Fatal("output with error")
			}
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if int64(len(out)) > maxOutput {
			t.Fatalf("output %d bytes over the limit", len(out))
		}
	})
}
