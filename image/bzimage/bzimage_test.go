package bzimage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/ulikunitz/xz/lzma"
)

func TestParseSetupHeader(t *testing.T) {
	for _, sects := range []byte{0, 1, 27, 39} {
		payload := gzipPayload(t, []byte("hello"))
		img := makeBzImage(payload, sects)
		in, err := ParseSetupHeader(img)
		if err != nil {
			t.Fatalf("setup_sects %d: %v", sects, err)
		}
		wantSects := int(sects)
		if sects == 0 {
			wantSects = 4
		}
		if in.SetupSects != wantSects || in.ProtectedOffset != int64(wantSects+1)*512 {
			t.Errorf("setup_sects %d: got SetupSects %d ProtectedOffset %#x", sects, in.SetupSects, in.ProtectedOffset)
		}
		if in.PayloadOffset != 0x40 || in.PayloadLength != uint32(len(payload)) || in.Codec != "gzip" {
			t.Errorf("got %+v", in)
		}
		if in.Version != "6.1.0-kpsim (test@kpsim) #1 SMP" {
			t.Errorf("Version = %q", in.Version)
		}
		if !IsBzImage(img) {
			t.Error("IsBzImage = false")
		}
		if !bytes.Equal(img[in.PayloadStart():in.PayloadEnd()], payload) {
			t.Error("PayloadStart/End do not bracket the payload")
		}
	}
	if IsBzImage(nil) || IsBzImage(make([]byte, 4096)) {
		t.Error("IsBzImage true on non-bzImage")
	}
}

func TestDecompressCodecs(t *testing.T) {
	data := elfish(300<<10, 1)
	cases := []struct {
		name    string
		payload func(t *testing.T) []byte
	}{
		{"xz-go-bcj", func(t *testing.T) []byte { return goXZPayload(t, data) }},
		{"xz-go-lzma2-only-sizes", func(t *testing.T) []byte {
			return appendTrailer(buildXZ([]xzBlockSpec{{filters: [][]byte{filterLZMA2}, sizes: true, data: data, lzma2: lzma2Compress(t, data)}}), len(data))
		}},
		{"xz-go-two-blocks", func(t *testing.T) []byte {
			a, b := data[:100000], data[100000:]
			encB := bytes.Clone(b)
			bcjX86(encB, 0, true)
			return appendTrailer(buildXZ([]xzBlockSpec{
				{filters: [][]byte{filterLZMA2}, data: a, lzma2: lzma2Compress(t, a)},
				{filters: [][]byte{filterX86, filterLZMA2}, sizes: true, data: b, lzma2: lzma2Compress(t, encB)},
			}), len(data))
		}},
		{"xz-go-bcj-start-offset", func(t *testing.T) []byte {
			enc := bytes.Clone(data)
			bcjX86(enc, 0x1000000, true)
			return appendTrailer(buildXZ([]xzBlockSpec{{filters: [][]byte{{0x04, 0x04, 0, 0, 0, 1}, filterLZMA2}, data: data, lzma2: lzma2Compress(t, enc)}}), len(data))
		}},
		{"gzip-go", func(t *testing.T) []byte { return gzipPayload(t, data) }},
		{"zstd-go", func(t *testing.T) []byte { return zstdPayload(t, data) }},
		{"lz4-legacy-go", func(t *testing.T) []byte { return appendTrailer(lz4LegacyPayload(t, data, 64<<10), len(data)) }},
		// The kernel's own recipes (scripts/Makefile.lib, scripts/xz_wrap.sh), via the CLIs.
		{"xz-cli-kernel", func(t *testing.T) []byte {
			return appendTrailer(runTool(t, data, "xz", "--check=crc32", "--x86", "--lzma2=dict=32MiB"), len(data))
		}},
		{"xz-cli-crc64-multiblock", func(t *testing.T) []byte {
			return appendTrailer(runTool(t, data, "xz", "--check=crc64", "--block-size=65536", "--x86", "--lzma2=preset=1"), len(data))
		}},
		{"xz-cli-sha256-threads", func(t *testing.T) []byte {
			return appendTrailer(runTool(t, data, "xz", "-T2", "--check=sha256", "--block-size=100000", "--x86=start=4096", "--lzma2=preset=6"), len(data))
		}},
		{"xz-cli-nocheck-lzma2", func(t *testing.T) []byte {
			return appendTrailer(runTool(t, data, "xz", "--check=none", "--lzma2=preset=0"), len(data))
		}},
		{"zstd-cli-kernel", func(t *testing.T) []byte {
			return appendTrailer(runTool(t, data, "zstd", "-19", "-q", "-c"), len(data))
		}},
		{"gzip-cli-kernel", func(t *testing.T) []byte { return runTool(t, data, "gzip", "-n", "-f", "-9", "-c") }},
		{"lz4-cli-kernel", func(t *testing.T) []byte {
			return appendTrailer(runTool(t, data, "lz4", "-l", "-9", "-c", "-q"), len(data))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := makeBzImage(c.payload(t), 27)
			out, in, err := Decompress("vmlinuz-test", img)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, data) {
				t.Fatalf("output differs from input (len %d vs %d)", len(out), len(data))
			}
			if want := strings.SplitN(c.name, "-", 2)[0]; in.Codec != want {
				t.Errorf("Codec = %q, want %q", in.Codec, want)
			}
		})
	}
}

// TestBCJx86AgainstXZ checks the decoder against xz's own x86 BCJ encoder:
// raw (headerless) LZMA2 from "xz -F raw --x86 --lzma2" decoded by the lzma
// package and then by DecodeBCJx86 must give the input back; and our test
// encoder must produce what xz's encoder produces.
func TestBCJx86AgainstXZ(t *testing.T) {
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("xz not installed: skipping the comparison with xz's BCJ encoder")
	}
	for i, start := range []uint32{0, 7, 0x1000000, 0xfffffff0} {
		data := elfish(100<<10+i, uint64(10+i))
		// Sprinkle adversarial E8/E9 runs: adjacent opcodes exercise prevMask.
		for j := 0; j+8 < len(data); j += 997 {
			copy(data[j:], []byte{0xe8, 0xe8, 0xe9, 0x00, 0xff, 0xe8, 0xff, 0x00})
		}
		xzArgs := []string{"-F", "raw", "--x86=start=" + fmt.Sprint(start), "--lzma2=dict=1MiB", "-c"}
		raw := runTool(t, data, "xz", xzArgs...)
		r, err := lzma.Reader2Config{DictCap: 1 << 20}.NewReader2(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		if err := readAllLimited(r, &got); err != nil {
			t.Fatal(err)
		}
		xzEncoded := bytes.Clone(got)
		DecodeBCJx86(got, start)
		if !bytes.Equal(got, data) {
			t.Fatalf("start %#x: DecodeBCJx86 does not invert xz's x86 encoder (first diff at %d)", start, firstDiff(got, data))
		}
		ours := bytes.Clone(data)
		bcjX86(ours, start, true)
		if !bytes.Equal(ours, xzEncoded) {
			t.Fatalf("start %#x: test encoder differs from xz's (first diff at %d)", start, firstDiff(ours, xzEncoded))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestBCJx86Small(t *testing.T) {
	// call rel32 -0x10 at offset 0: encoded absolute = -0x10 + 5 = -0xb.
	enc := []byte{0xe8, 0xf5, 0xff, 0xff, 0xff, 0x90}
	DecodeBCJx86(enc, 0)
	if want := []byte{0xe8, 0xf0, 0xff, 0xff, 0xff, 0x90}; !bytes.Equal(enc, want) {
		t.Errorf("got % x, want % x", enc, want)
	}
	// Fewer than 5 bytes, or an opcode in the last 4 bytes: untouched.
	for _, b := range [][]byte{nil, {0xe8}, {0xe8, 1, 2, 3}, {0x90, 0xe8, 1, 0, 0}} {
		c := bytes.Clone(b)
		DecodeBCJx86(c, 0)
		if !bytes.Equal(b, c) {
			t.Errorf("% x changed to % x", b, c)
		}
	}
}

// mutate returns a copy of b with f applied.
func mutate(b []byte, f func([]byte) []byte) []byte { return f(bytes.Clone(b)) }

func TestDecompressBadInputs(t *testing.T) {
	data := elfish(64<<10, 2)
	good := makeBzImage(goXZPayload(t, data), 27)
	in, err := ParseSetupHeader(good)
	if err != nil {
		t.Fatal(err)
	}
	ps := int(in.PayloadStart())
	pe := int(in.PayloadEnd())

	withPayload := func(p []byte) []byte { return makeBzImage(p, 27) }
	// An xz payload with a chosen filter chain, sizes and LZMA2 bytes.
	xzWith := func(spec xzBlockSpec) []byte {
		return withPayload(appendTrailer(buildXZ([]xzBlockSpec{spec}), len(spec.data)))
	}
	enc := bytes.Clone(data)
	bcjX86(enc, 0, true)
	lz2 := lzma2Compress(t, enc)

	cases := []struct {
		name string
		img  []byte
		kind error
		msg  string // substring of the error
	}{
		{"empty", nil, ErrTruncated, "vmlinuz: truncated bzImage: file is 0 bytes"},
		{"short", good[:300], ErrTruncated, "too short for the setup header"},
		{"no-magic", make([]byte, 8192), ErrNotBzImage, "vmlinuz: not a bzImage (no HdrS magic at 0x202)"},
		{"no-magic-short", make([]byte, 0x220), ErrNotBzImage, "no HdrS magic"},
		{"old-protocol", mutate(good, func(b []byte) []byte { binary.LittleEndian.PutUint16(b[offVersion:], 0x0206); return b }),
			ErrUnsupported, "boot protocol 2.06 is older than 2.08"},
		{"zero-payload-length", mutate(good, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[offPayloadLength:], 0); return b }),
			ErrCorrupt, "payload_length 0"},
		{"truncated-payload", good[:pe-100], ErrTruncated,
			fmt.Sprintf("vmlinuz: truncated bzImage: payload ends at %d past file size %d", pe, pe-100)},
		{"huge-payload-offset", mutate(good, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[offPayloadOffset:], 0xffffffff); return b }),
			ErrTruncated, "payload ends at"},
		{"unknown-codec", withPayload([]byte("\x00\x01\x02\x03\x04\x05\x06\x07")), ErrUnsupported, "unknown payload compression (magic 00 01 02 03 04 05)"},
		{"bzip2", withPayload([]byte("BZh91AY&SY....")), ErrUnsupported, "compressed with bzip2"},
		{"xz-bad-stream-crc", mutate(good, func(b []byte) []byte { b[ps+8] ^= 0xff; return b }),
			ErrCorrupt, "vmlinuz: corrupt xz stream: stream header CRC32 mismatch"},
		{"xz-bad-block-header-crc", xzWith(xzBlockSpec{filters: [][]byte{filterX86, filterLZMA2}, data: data, lzma2: lz2, badHdrCRC: true}),
			ErrCorrupt, "block header CRC32 mismatch"},
		{"xz-block-header-past-end", withPayload(appendTrailer(mutate(good[ps:ps+12], func(b []byte) []byte { return append(b, 0xff) }), 1)),
			ErrCorrupt, "runs past the payload"},
		{"xz-filter-chain-delta", xzWith(xzBlockSpec{filters: [][]byte{{0x03, 0x01, 0x00}, filterLZMA2}, data: data, lzma2: lz2}),
			ErrUnsupported, `unsupported xz filter chain ["delta" "LZMA2"]`},
		{"xz-filter-chain-bcj-last", xzWith(xzBlockSpec{filters: [][]byte{filterLZMA2, filterX86}, data: data, lzma2: lz2}),
			ErrUnsupported, `unsupported xz filter chain ["LZMA2" "x86 BCJ"]`},
		{"xz-bad-lzma2-props", xzWith(xzBlockSpec{filters: [][]byte{filterX86, {0x21, 0x01, 41}}, data: data, lzma2: lz2}),
			ErrCorrupt, "bad LZMA2 filter properties 29"},
		{"xz-bad-bcj-props", xzWith(xzBlockSpec{filters: [][]byte{{0x04, 0x02, 0, 0}, filterLZMA2}, data: data, lzma2: lz2}),
			ErrCorrupt, "x86 BCJ filter properties are 2 bytes"},
		{"xz-garbage-lzma2", xzWith(xzBlockSpec{filters: [][]byte{filterX86, filterLZMA2}, data: data, lzma2: bytes.Repeat([]byte{0xe1, 0x7f, 0xff, 0x01, 0x33}, 100)}),
			ErrCorrupt, "LZMA2 data of block at"},
		{"xz-lzma2-no-end", xzWith(xzBlockSpec{filters: [][]byte{filterX86, filterLZMA2}, data: data, lzma2: lz2[:len(lz2)-1]}),
			ErrCorrupt, "corrupt xz stream"},
		{"xz-bad-data-crc", mutate(good, func(b []byte) []byte { b[pe-4-12-12-4] ^= 1; return b }),
			ErrCorrupt, "block data check mismatch"},
		{"xz-bad-footer-magic", mutate(good, func(b []byte) []byte { b[pe-5] = 'Q'; return b }),
			ErrCorrupt, "bad stream footer magic"},
		{"xz-wrong-trailer", mutate(good, func(b []byte) []byte { b[pe-4]++; return b }),
			ErrCorrupt, fmt.Sprintf("xz payload decompressed to %d bytes but its size trailer says %d", len(data), len(data)+1)},
		{"xz-huge-trailer", mutate(good, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[pe-4:], 0xffffffff); return b }),
			ErrCorrupt, "but its size trailer says 4294967295"},
		{"xz-no-trailer", withPayload(buildXZ([]xzBlockSpec{{filters: [][]byte{filterLZMA2}, data: data, lzma2: lzma2Compress(t, data)}})),
			ErrCorrupt, "payload ends 0 bytes after the xz stream footer, too few for the 4-byte size trailer"},
		{"xz-junk-after-stream", withPayload(appendTrailer(append(buildXZ([]xzBlockSpec{{filters: [][]byte{filterLZMA2}, data: data, lzma2: lzma2Compress(t, data)}}), 0, 0, 0, 0), len(data))),
			ErrCorrupt, "4 unexpected bytes between the xz stream footer and the 4-byte size trailer"},
		{"xz-stream-only-header", withPayload(appendTrailer([]byte(good[ps:ps+12]), 0)), ErrCorrupt, "index CRC32 truncated"},
		{"gzip-garbage", withPayload([]byte("\x1f\x8b\x08\x00garbagegarbage")), ErrCorrupt, "corrupt gzip stream"},
		{"gzip-truncated", withPayload(gzipPayload(t, data)[:200]), ErrCorrupt, "gzip"},
		{"zstd-garbage", withPayload(appendTrailer([]byte("\x28\xb5\x2f\xfdgarbage-garbage"), 10)), ErrCorrupt, "corrupt zstd stream"},
		{"lz4-block-past-end", withPayload(appendTrailer([]byte("\x02\x21\x4c\x18\xff\xff\x00\x00abc"), 10)), ErrCorrupt, "block of 65535 bytes runs past the payload"},
		{"lz4-garbage-block", withPayload(appendTrailer([]byte("\x02\x21\x4c\x18\x04\x00\x00\x00\xff\xff\xff\xff"), 10)), ErrCorrupt, "corrupt lz4 stream: invalid block"},
		{"lz4-short", withPayload([]byte("\x02\x21\x4c")), ErrUnsupported, "unknown payload compression"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := Decompress("vmlinuz", c.img)
			if err == nil {
				t.Fatalf("no error; got %d bytes", len(out))
			}
			if out != nil {
				t.Errorf("non-nil output with error")
			}
			if !errors.Is(err, c.kind) {
				t.Errorf("error %q is not %v", err, c.kind)
			}
			if !strings.HasPrefix(err.Error(), "vmlinuz: ") || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not contain %q", err, c.msg)
			}
			t.Log(err)
		})
	}
}

func TestDebianKernel(t *testing.T) {
	b, out, in := decompressKernel(t)
	if !bytes.HasPrefix(out, []byte("\x7fELF")) {
		t.Fatalf("output does not start with an ELF magic: % x", out[:min(len(out), 16)])
	}
	if in.Codec != "xz" || in.PayloadLength == 0 {
		t.Errorf("Info %+v", in)
	}
	t.Logf("Info: %+v; vmlinux %d bytes", in, len(out))
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("xz not installed: skipping the byte-for-byte comparison with xz -dc --single-stream")
	}
	want := runTool(t, b[in.PayloadStart():in.PayloadEnd()], "xz", "-dc", "--single-stream")
	if got, w := sha256.Sum256(out), sha256.Sum256(want); got != w {
		t.Fatalf("sha256 %x (%d bytes) differs from xz CLI %x (%d bytes); first diff at %d", got, len(out), w, len(want), firstDiff(out, want))
	}
}

func TestDebianKernelHeader(t *testing.T) {
	_, b := loadKernel(t)
	in, err := ParseSetupHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if !IsBzImage(b) || in.Codec != "xz" || !strings.HasPrefix(in.Version, "6.1.") {
		t.Errorf("Info %+v", in)
	}
	// Every truncation point fails cleanly with the file name.
	for _, n := range []int{0, 0x1f1, 0x24f, int(in.PayloadStart()) + 100, int(in.PayloadEnd()) - 1} {
		_, _, err := Decompress("vmlinuz", b[:n])
		if err == nil || !strings.HasPrefix(err.Error(), "vmlinuz: truncated bzImage") {
			t.Errorf("cut at %d: %v", n, err)
		}
	}
}

func BenchmarkDecompressDebian(b *testing.B) {
	p, img := loadKernel(b)
	in, err := ParseSetupHeader(img)
	if err != nil {
		b.Fatal(err)
	}
	// Throughput in vmlinux (output) bytes, from the size trailer.
	b.SetBytes(int64(binary.LittleEndian.Uint32(img[in.PayloadEnd()-4:])))
	for b.Loop() {
		if _, _, err := Decompress(p, img); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCRCFieldsOfBuilder(t *testing.T) {
	// Sanity of the test-side xz builder itself: the xz CLI accepts it.
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("xz not installed")
	}
	data := elfish(20000, 3)
	p := goXZPayload(t, data)
	got := runTool(t, p[:len(p)-4], "xz", "-dc")
	if !bytes.Equal(got, data) {
		t.Fatal("xz CLI disagrees with the test xz builder")
	}
}

func TestOutputLimit(t *testing.T) {
	data := elfish(200<<10, 4)
	payloads := map[string][]byte{
		"xz":   goXZPayload(t, data),
		"gzip": gzipPayload(t, data),
		"zstd": zstdPayload(t, data),
		"lz4":  appendTrailer(lz4LegacyPayload(t, data, 64<<10), len(data)),
	}
	old := maxOutput
	defer func() { maxOutput = old }()
	for codec, p := range payloads {
		img := makeBzImage(p, 27)
		maxOutput = int64(len(data)) // exactly enough
		if out, _, err := Decompress("vmlinuz", img); err != nil || !bytes.Equal(out, data) {
			t.Errorf("%s at the limit: err %v", codec, err)
		}
		maxOutput = int64(len(data)) - 1
		_, _, err := Decompress("vmlinuz", img)
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s over the limit: err %v, want ErrTooLarge", codec, err)
		}
		t.Log(err)
	}
}
