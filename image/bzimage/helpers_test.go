package bzimage

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz/lzma"
)

// elfish returns n deterministic bytes that look like an x86-64 ELF: an ELF
// magic, then "code" dense in E8/E9 rel32 calls and jumps (near targets, so
// BCJ converts them), plus some text and zero runs so it compresses.
func elfish(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x6b7073696d))
	b := make([]byte, 0, n+16)
	b = append(b, "\x7fELF\x02\x01\x01\x00"...)
	ops := [][]byte{
		{0x55}, {0x48, 0x89, 0xe5}, {0x5d}, {0xc3}, {0x90}, {0x0f, 0x1f, 0x44, 0x00, 0x00},
		{0x48, 0x8b, 0x07}, {0x31, 0xc0}, {0xff, 0xff}, {0x00, 0x00, 0x00},
	}
	for len(b) < n {
		switch k := r.IntN(10); {
		case k < 4: // call/jmp rel32 with a near target
			op := byte(0xe8)
			if k == 3 {
				op = 0xe9
			}
			d := int32(r.IntN(1<<20)) - 1<<19
			b = append(b, op)
			b = binary.LittleEndian.AppendUint32(b, uint32(d))
		case k < 8:
			b = append(b, ops[r.IntN(len(ops))]...)
		case k < 9:
			b = append(b, "kpsim: synthetic vmlinux text\x00"...)
		default:
			b = append(b, make([]byte, r.IntN(64))...)
		}
	}
	return b[:n]
}

// makeBzImage wraps payload (already carrying its size trailer) in a minimal
// boot-protocol-2.15 bzImage with the given setup_sects value.
func makeBzImage(payload []byte, setupSects byte) []byte {
	sects := int(setupSects)
	if sects == 0 {
		sects = 4
	}
	prot := (sects + 1) * 512
	const payloadOff = 0x40
	b := make([]byte, prot+payloadOff, prot+payloadOff+len(payload)+64)
	b[offSetupSects] = setupSects
	binary.LittleEndian.PutUint16(b[offBootFlag:], 0xAA55)
	copy(b[offHeaderMagic:], "HdrS")
	binary.LittleEndian.PutUint16(b[offVersion:], 0x020f)
	ver := "6.1.0-kpsim (test@kpsim) #1 SMP\x00"
	copy(b[0x400:], ver)
	binary.LittleEndian.PutUint16(b[offKernelVersion:], 0x400-0x200)
	binary.LittleEndian.PutUint32(b[offPayloadOffset:], payloadOff)
	binary.LittleEndian.PutUint32(b[offPayloadLength:], uint32(len(payload)))
	b = append(b, payload...)
	b = append(b, "tail: not payload"...)
	return b
}

func appendTrailer(c []byte, n int) []byte {
	return binary.LittleEndian.AppendUint32(c, uint32(n))
}

// --- pure-Go xz builder, so that xz parsing is tested without the CLI ---

type xzBlockSpec struct {
	filters   [][]byte // raw filter flags (ID, props size, props)
	sizes     bool     // store compressed/uncompressed sizes in the header
	data      []byte   // uncompressed (after undoing all filters)
	lzma2     []byte   // compressed LZMA2 data (with end marker)
	badHdrCRC bool
}

func lzma2Compress(t testing.TB, data []byte) []byte {
	var buf bytes.Buffer
	w, err := lzma.Writer2Config{DictCap: 1 << 16}.NewWriter2(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func vliAppend(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

var (
	filterX86   = []byte{0x04, 0x00}
	filterLZMA2 = []byte{0x21, 0x01, 0x08} // dict 64 KiB
)

// buildXZ assembles a CRC32-checked .xz stream from blocks.
func buildXZ(blocks []xzBlockSpec) []byte {
	le := binary.LittleEndian
	s := []byte(xzHeaderMagic)
	s = append(s, 0x00, 0x01)
	s = le.AppendUint32(s, crc32.ChecksumIEEE(s[6:8]))
	var idx []byte
	for _, bl := range blocks {
		h := []byte{0, byte(len(bl.filters) - 1)}
		if bl.sizes {
			h[1] |= 0xc0
			h = vliAppend(h, uint64(len(bl.lzma2)))
			h = vliAppend(h, uint64(len(bl.data)))
		}
		for _, f := range bl.filters {
			h = append(h, f...)
		}
		for (len(h)+4)%4 != 0 {
			h = append(h, 0)
		}
		h[0] = byte((len(h)+4)/4 - 1)
		crc := crc32.ChecksumIEEE(h)
		if bl.badHdrCRC {
			crc ^= 1
		}
		h = le.AppendUint32(h, crc)
		s = append(s, h...)
		s = append(s, bl.lzma2...)
		for i := len(bl.lzma2); i%4 != 0; i++ {
			s = append(s, 0)
		}
		s = le.AppendUint32(s, crc32.ChecksumIEEE(bl.data))
		idx = vliAppend(idx, uint64(len(h)+len(bl.lzma2)+4))
		idx = vliAppend(idx, uint64(len(bl.data)))
	}
	ix := vliAppend([]byte{0}, uint64(len(blocks)))
	ix = append(ix, idx...)
	for len(ix)%4 != 0 {
		ix = append(ix, 0)
	}
	ix = le.AppendUint32(ix, crc32.ChecksumIEEE(ix))
	s = append(s, ix...)
	ft := le.AppendUint32(nil, uint32(len(ix)/4-1))
	ft = append(ft, 0x00, 0x01)
	s = le.AppendUint32(s, crc32.ChecksumIEEE(ft))
	s = append(s, ft...)
	return append(s, "YZ"...)
}

// goXZPayload is an xz payload (BCJ x86 + LZMA2, with trailer) built purely
// in Go from data, using the test-side BCJ encoder.
func goXZPayload(t testing.TB, data []byte) []byte {
	enc := bytes.Clone(data)
	bcjX86(enc, 0, true)
	x := buildXZ([]xzBlockSpec{{filters: [][]byte{filterX86, filterLZMA2}, data: data, lzma2: lzma2Compress(t, enc)}})
	return appendTrailer(x, len(data))
}

func gzipPayload(t testing.TB, data []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes() // ISIZE is the trailer
}

func zstdPayload(t testing.TB, data []byte) []byte {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return appendTrailer(enc.EncodeAll(data, nil), len(data))
}

// lz4LegacyPayload builds a legacy LZ4 frame with blocks of blockSize.
func lz4LegacyPayload(t testing.TB, data []byte, blockSize int) []byte {
	out := binary.LittleEndian.AppendUint32(nil, lz4LegacyMagic)
	for len(data) > 0 {
		chunk := data[:min(blockSize, len(data))]
		data = data[len(chunk):]
		dst := make([]byte, lz4.CompressBlockBound(len(chunk)))
		n, err := lz4.CompressBlock(chunk, dst, nil)
		if err != nil || n == 0 {
			t.Fatalf("lz4 compress: n=%d err=%v", n, err)
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(n))
		out = append(out, dst[:n]...)
	}
	return out
}

// runTool pipes in through an external compressor; it skips when the tool
// is not installed.
func runTool(t testing.TB, in []byte, name string, args ...string) []byte {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed: skipping the comparison with the %s CLI", name, name)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %q: %v: %s", name, args, err, stderr.Bytes())
	}
	return out
}

// --- the real Debian kernel ---

const defaultKernel = "vmlinuz-6.1.0-57-amd64"

func kernelPath() string {
	if p := os.Getenv("KPSIM_KERNEL"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", ".cache", "kernels", defaultKernel)
}

func loadKernel(t testing.TB) (string, []byte) {
	t.Helper()
	p := kernelPath()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Skipf("real kernel not available (%v): put a bzImage at .cache/kernels/%s or set KPSIM_KERNEL", err, defaultKernel)
	}
	return p, b
}

// decompressedKernel decompresses the real kernel once per test binary: it
// is the slow part, especially under -race.
var kernelOnce struct {
	sync.Once
	out  []byte
	info Info
	err  error
}

func decompressKernel(t testing.TB) ([]byte, []byte, Info) {
	t.Helper()
	p, b := loadKernel(t)
	kernelOnce.Do(func() {
		kernelOnce.out, kernelOnce.info, kernelOnce.err = Decompress(filepath.Base(p), b)
	})
	if kernelOnce.err != nil {
		t.Fatal(kernelOnce.err)
	}
	return b, kernelOnce.out, kernelOnce.info
}
