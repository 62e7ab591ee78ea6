package module

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// MaxModuleSize bounds a module's decompressed size: 256 MiB, far above
// any Debian module (the largest, amdgpu, is about 30 MiB unpacked). It is
// the simulator's own limit, not the kernel's (module_decompress grows its
// page array as long as memory lasts).
const MaxModuleSize = 256 << 20

// maxXZDict bounds an xz block's LZMA2 dictionary: the decoder allocates
// it up front. xz -9 uses 64 MiB; the kernel's modules use 1 MiB
// (scripts/Makefile.modinst: xz --lzma2=dict=1MiB).
const maxXZDict = 64 << 20

// Compression suffixes of module files, as kmod and the kernel's
// CONFIG_MODULE_COMPRESS_{GZIP,XZ,ZSTD} name them, with their magic.
var moduleCodecs = []struct {
	suffix, name, magic string
}{
	{".xz", "xz", "\xfd7zXZ\x00"},
	{".zst", "zstd", "\x28\xb5\x2f\xfd"},
	{".gz", "gzip", "\x1f\x8b"},
}

// moduleSuffixes are the file names a module tree holds a module under,
// plain first.
var moduleSuffixes = []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"}

// isModuleFile reports whether name is a module file: NAME.ko, optionally
// compressed (.ko.xz, .ko.zst, .ko.gz).
func isModuleFile(name string) bool {
	for _, s := range moduleSuffixes {
		if strings.HasSuffix(name, s) && len(name) > len(s) {
			return true
		}
	}
	return false
}

// Decompress returns the ELF image of a module file: b itself for a plain
// .ko, else b decompressed by its magic (xz, zstd or gzip). name is the
// file's name, for errors; a name ending in a compression suffix whose
// bytes do not carry that format's magic is refused. At most
// MaxModuleSize bytes come out: a larger module is an error naming the
// file. xz and gzip data must be one stream (one member), as the
// kernel's module_xz_decompress and module_gzip_decompress decode one;
// bytes after it (xz stream padding aside) are an error. zstd frames are
// decoded as zstd -d does (module_zstd_decompress stops after the first).
//
// Models kernel/module/decompress.c:module_decompress (the format the
// kernel was built for, CONFIG_MODULE_COMPRESS_XZ on Debian; kmod
// decompresses in user space when the kernel cannot, so every format is
// accepted here).
func Decompress(name string, b []byte) ([]byte, error) {
	return decompressLimit(name, b, MaxModuleSize)
}

func decompressLimit(name string, b []byte, limit int64) ([]byte, error) {
	byMagic, bySuffix := -1, -1
	for i, c := range moduleCodecs {
		if bytes.HasPrefix(b, []byte(c.magic)) {
			byMagic = i
		}
		if strings.HasSuffix(name, c.suffix) {
			bySuffix = i
		}
	}
	if bySuffix >= 0 && byMagic != bySuffix {
		c := moduleCodecs[bySuffix]
		return nil, fmt.Errorf("%s: not %s data (no %s magic at the start of the file)", name, c.name, c.name)
	}
	if byMagic < 0 {
		return b, nil
	}
	c := moduleCodecs[byMagic]
	var out []byte
	var err error
	switch c.name {
	case "xz":
		out, err = decodeXZ(b, limit)
	case "zstd":
		out, err = decodeZstd(b, limit)
	default:
		out, err = decodeGzip(b, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %v", name, c.name, err)
	}
	return out, nil
}

// errTooBig is the error for a module over the limit.
func errTooBig(limit int64) error {
	return fmt.Errorf("the module is larger than %d MiB decompressed (more than kpsim reads)", limit>>20)
}

// maxRatio bounds a size hint by the compressed size: neither xz, zstd
// nor deflate expands a byte into more than about 1032 (deflate's
// limit), so a larger hint is a crafted trailer, not a size.
const maxRatio = 1032

// readLimited reads r to its end, failing past limit bytes. hint, the
// size the stream's own trailer or index announces, presizes the buffer
// only up to maxRatio times the compressed size in: a crafted trailer
// cannot make a tiny file allocate the limit.
func readLimited(r io.Reader, limit int64, hint int64, in int) ([]byte, error) {
	var buf bytes.Buffer
	if hint > 0 && hint <= limit && hint <= maxRatio*int64(in) {
		buf.Grow(int(hint))
	}
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, errTooBig(limit)
	}
	return buf.Bytes(), nil
}

// decodeXZ checks the stream's structure (one stream, its index, each
// block's filter chain and dictionary size) before decoding, so that
// neither the output nor the decoder's dictionary can exceed the limits,
// then decodes it with github.com/ulikunitz/xz.
func decodeXZ(b []byte, limit int64) ([]byte, error) {
	total, err := xzPrecheck(b, limit)
	if err != nil {
		return nil, err
	}
	r, err := xz.ReaderConfig{SingleStream: true}.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out, err := readLimited(r, limit, total, len(b))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) != total {
		return nil, fmt.Errorf("%d bytes decoded, the index says %d", len(out), total)
	}
	return out, nil
}

// xzVLI reads an xz variable-length integer (at most 9 bytes) at b[off:].
func xzVLI(b []byte, off int) (uint64, int, error) {
	var v uint64
	for i := 0; i < 9; i++ {
		if off+i >= len(b) {
			return 0, 0, errors.New("truncated stream")
		}
		c := b[off+i]
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if i > 0 && c == 0 {
				return 0, 0, errors.New("corrupt stream: a number is not minimally encoded")
			}
			return v, off + i + 1, nil
		}
	}
	return 0, 0, errors.New("corrupt stream: a number is longer than 9 bytes")
}

// xzPrecheck walks an .xz file from its footer: the stream footer, the
// index (the blocks' sizes), and every block header's filter flags. It
// returns the decompressed size the index records.
func xzPrecheck(b []byte, limit int64) (int64, error) {
	le := binary.LittleEndian
	if len(b) < 24 {
		return 0, errors.New("truncated stream")
	}
	if crc32.ChecksumIEEE(b[6:8]) != le.Uint32(b[8:12]) {
		return 0, errors.New("corrupt stream header (CRC32)")
	}
	// The stream ends where the padding (zero words) starts.
	end := len(b)
	for end >= 4 && le.Uint32(b[end-4:]) == 0 {
		end -= 4
	}
	if end%4 != 0 || end < 24 {
		return 0, errors.New("truncated stream or bytes after it")
	}
	foot := b[end-12 : end]
	if string(foot[10:12]) != "YZ" {
		return 0, errors.New("no stream footer at the end of the data (truncated, or more than one stream)")
	}
	if crc32.ChecksumIEEE(foot[4:10]) != le.Uint32(foot[0:4]) {
		return 0, errors.New("corrupt stream footer (CRC32)")
	}
	if !bytes.Equal(foot[8:10], b[6:8]) {
		return 0, errors.New("stream header and footer flags differ")
	}
	isize := (int(le.Uint32(foot[4:8])) + 1) * 4
	istart := end - 12 - isize
	if isize < 8 || istart < 12 {
		return 0, errors.New("index size out of range")
	}
	idx := b[istart : end-12]
	if idx[0] != 0 {
		return 0, errors.New("corrupt index (no index indicator)")
	}
	if crc32.ChecksumIEEE(idx[:len(idx)-4]) != le.Uint32(idx[len(idx)-4:]) {
		return 0, errors.New("corrupt index (CRC32)")
	}
	n, off, err := xzVLI(idx, 1)
	if err != nil {
		return 0, err
	}
	if n > uint64(len(idx)) {
		return 0, fmt.Errorf("index lists %d blocks in %d bytes", n, len(idx))
	}
	var total int64
	pos := 12
	for i := uint64(0); i < n; i++ {
		var unpadded, usize uint64
		if unpadded, off, err = xzVLI(idx, off); err != nil {
			return 0, err
		}
		if usize, off, err = xzVLI(idx, off); err != nil {
			return 0, err
		}
		if usize > uint64(limit) || total+int64(usize) > limit {
			return 0, errTooBig(limit)
		}
		total += int64(usize)
		if unpadded == 0 || unpadded > uint64(istart-pos) {
			return 0, fmt.Errorf("block %d: size %d runs past the index", i, unpadded)
		}
		if err := xzBlockHeader(b[pos:istart], i); err != nil {
			return 0, err
		}
		pos += int((unpadded + 3) &^ 3)
	}
	if pos != istart {
		return 0, fmt.Errorf("the index's %d blocks end at %d, the index starts at %d", n, pos, istart)
	}
	return total, nil
}

// xzBlockHeader checks one block header: a filter chain the decoder
// handles (LZMA2, optionally after delta or a BCJ filter is refused: a
// module is plain LZMA2) with a dictionary of at most maxXZDict.
func xzBlockHeader(b []byte, i uint64) error {
	if len(b) == 0 || b[0] == 0 {
		return fmt.Errorf("block %d: no block header", i)
	}
	hsize := (int(b[0]) + 1) * 4
	if hsize > len(b) {
		return fmt.Errorf("block %d: truncated header", i)
	}
	h := b[:hsize]
	if crc32.ChecksumIEEE(h[:hsize-4]) != binary.LittleEndian.Uint32(h[hsize-4:]) {
		return fmt.Errorf("block %d: corrupt header (CRC32)", i)
	}
	flags := h[1]
	off := 2
	var err error
	if flags&0x40 != 0 {
		if _, off, err = xzVLI(h, off); err != nil {
			return err
		}
	}
	if flags&0x80 != 0 {
		if _, off, err = xzVLI(h, off); err != nil {
			return err
		}
	}
	nf := int(flags&3) + 1
	for f := 0; f < nf; f++ {
		var id, psize uint64
		if id, off, err = xzVLI(h, off); err != nil {
			return err
		}
		if psize, off, err = xzVLI(h, off); err != nil {
			return err
		}
		if psize > uint64(len(h)-off) {
			return fmt.Errorf("block %d: truncated filter properties", i)
		}
		props := h[off : off+int(psize)]
		off += int(psize)
		if id != 0x21 || f != nf-1 {
			return fmt.Errorf("block %d: filter %#x: a module's xz blocks hold LZMA2 only", i, id)
		}
		if len(props) != 1 || props[0] > 40 {
			return fmt.Errorf("block %d: bad LZMA2 properties", i)
		}
		if d := props[0]; d < 40 {
			if dict := uint64(2|d&1) << (d/2 + 11); dict > maxXZDict {
				return fmt.Errorf("block %d: a %d MiB dictionary, more than kpsim allows (%d MiB)", i, dict>>20, maxXZDict>>20)
			}
		} else {
			return fmt.Errorf("block %d: a 4 GiB dictionary, more than kpsim allows (%d MiB)", i, maxXZDict>>20)
		}
	}
	return nil
}

// decodeZstd decodes one zstd frame with bounded memory and output.
func decodeZstd(b []byte, limit int64) ([]byte, error) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(uint64(limit)), zstd.WithDecoderMaxWindow(uint64(min(limit, 1<<30))))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	out, err := dec.DecodeAll(b, nil)
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, errTooBig(limit)
		}
		return nil, err
	}
	if int64(len(out)) > limit {
		return nil, errTooBig(limit)
	}
	return out, nil
}

// decodeGzip decodes one gzip member with bounded output.
func decodeGzip(b []byte, limit int64) ([]byte, error) {
	br := bytes.NewReader(b)
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, err
	}
	zr.Multistream(false)
	hint := int64(0)
	if len(b) >= 4 {
		hint = int64(binary.LittleEndian.Uint32(b[len(b)-4:])) // ISIZE
	}
	out, err := readLimited(zr, limit, hint, len(b))
	if err != nil {
		return nil, err
	}
	if br.Len() != 0 {
		return nil, fmt.Errorf("%d bytes after the gzip member", br.Len())
	}
	return out, nil
}
