package bzimage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

// A minimal .xz decoder (xz file format 1.2.x) for kernel payloads: one
// stream, any number of blocks, each with the filter chain [LZMA2] or
// [x86 BCJ, LZMA2]; CRC32/CRC64/SHA-256/none checks. The raw LZMA2 data is
// decoded by github.com/ulikunitz/xz/lzma, which does not handle BCJ.

const (
	xzHeaderMagic = "\xfd7zXZ\x00"
	xzFooterMagic = "YZ"

	xzFilterX86   = 0x04
	xzFilterLZMA2 = 0x21
)

var xzFilterNames = map[uint64]string{
	0x03: "delta", 0x04: "x86 BCJ", 0x05: "PowerPC BCJ", 0x06: "IA-64 BCJ",
	0x07: "ARM BCJ", 0x08: "ARM-Thumb BCJ", 0x09: "SPARC BCJ", 0x0a: "ARM64 BCJ",
	0x0b: "RISC-V BCJ", 0x21: "LZMA2",
}

func xzFilterName(id uint64) string {
	if n, ok := xzFilterNames[id]; ok {
		return n
	}
	return fmt.Sprintf("unknown filter %#x", id)
}

var crc64Table = crc64.MakeTable(crc64.ECMA)

// xzCheckSize is the size of the check field for each check type (0x0-0xF).
var xzCheckSize = [16]int{0, 4, 4, 4, 8, 8, 8, 16, 16, 16, 32, 32, 32, 64, 64, 64}

func xzNewCheck(typ byte) hash.Hash {
	switch typ {
	case 0x01:
		return crc32.NewIEEE()
	case 0x04:
		return crc64.New(crc64Table)
	case 0x0a:
		return sha256.New()
	}
	return nil
}

// xzDecoder holds the state of one decode; errors carry file offsets.
type xzDecoder struct {
	p    []byte // payload: xz stream + 4-byte size trailer
	base int64  // file offset of p[0]
	want int64  // uncompressed size according to the size trailer
}

func (d *xzDecoder) errf(off int, format string, args ...any) *Error {
	return newErr(ErrCorrupt, d.base+int64(off), "corrupt xz stream: "+format, args...)
}

// vli reads an xz variable-length integer from p[off:limit].
func (d *xzDecoder) vli(off, limit int, what string) (uint64, int, error) {
	var v uint64
	for i := 0; i < 9; i++ {
		if off+i >= limit {
			return 0, 0, d.errf(off, "%s: integer runs past its field", what)
		}
		c := d.p[off+i]
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if c == 0 && i > 0 {
				return 0, 0, d.errf(off, "%s: non-minimal integer encoding", what)
			}
			return v, off + i + 1, nil
		}
	}
	return 0, 0, d.errf(off, "%s: integer longer than 9 bytes", what)
}

type xzRecord struct{ unpadded, uncompressed uint64 }

func decodeXZ(p []byte, base int64) ([]byte, error) {
	want, err := sizeTrailer(p, base, "xz")
	if err != nil {
		return nil, err
	}
	d := &xzDecoder{p: p, base: base, want: want}
	return d.decode()
}

func (d *xzDecoder) decode() ([]byte, error) {
	p := d.p
	// Stream header: magic(6) flags(2) crc32(4).
	if len(p) < 12 {
		return nil, d.errf(0, "stream header truncated (%d bytes)", len(p))
	}
	if string(p[:6]) != xzHeaderMagic {
		return nil, d.errf(0, "bad stream header magic % x", p[:6])
	}
	flags := p[6:8]
	if got, stored := crc32.ChecksumIEEE(flags), binary.LittleEndian.Uint32(p[8:]); got != stored {
		return nil, d.errf(8, "stream header CRC32 mismatch (stored %#08x, computed %#08x)", stored, got)
	}
	if flags[0] != 0 || flags[1]&0xf0 != 0 {
		return nil, d.errf(6, "unsupported stream flags % x", flags)
	}
	checkType := flags[1] & 0x0f
	checkSize := xzCheckSize[checkType]
	if checkType != 0 && xzNewCheck(checkType) == nil {
		return nil, newErr(ErrUnsupported, d.base+7, "xz stream uses unsupported check type %#x", checkType)
	}

	out := make([]byte, 0, sizeHint(d.want, len(p)))
	var records []xzRecord
	off := 12
	for {
		if off >= len(p) {
			return nil, d.errf(off, "stream ends before its index")
		}
		if p[off] == 0 { // index indicator
			break
		}
		rec, next, err := d.block(off, checkType, checkSize, &out)
		if err != nil {
			return nil, err
		}
		records = append(records, rec)
		off = next
	}

	// Index.
	idxStart := off
	n, off, err := d.vli(off+1, len(p), "index record count")
	if err != nil {
		return nil, err
	}
	if n != uint64(len(records)) {
		return nil, d.errf(idxStart, "index lists %d blocks, stream has %d", n, len(records))
	}
	for i, r := range records {
		var unp, unc uint64
		if unp, off, err = d.vli(off, len(p), "index unpadded size"); err != nil {
			return nil, err
		}
		if unc, off, err = d.vli(off, len(p), "index uncompressed size"); err != nil {
			return nil, err
		}
		if unp != r.unpadded || unc != r.uncompressed {
			return nil, d.errf(idxStart, "index record %d (unpadded %d, uncompressed %d) does not match block (%d, %d)", i, unp, unc, r.unpadded, r.uncompressed)
		}
	}
	for (off-idxStart)%4 != 0 {
		if off >= len(p) {
			return nil, d.errf(off, "index truncated")
		}
		if p[off] != 0 {
			return nil, d.errf(off, "non-zero index padding")
		}
		off++
	}
	if off+4 > len(p) {
		return nil, d.errf(off, "index CRC32 truncated")
	}
	if got, stored := crc32.ChecksumIEEE(p[idxStart:off]), binary.LittleEndian.Uint32(p[off:]); got != stored {
		return nil, d.errf(off, "index CRC32 mismatch (stored %#08x, computed %#08x)", stored, got)
	}
	off += 4
	idxSize := off - idxStart

	// Stream footer: crc32(4) backward size(4) flags(2) magic(2).
	if off+12 > len(p) {
		return nil, d.errf(off, "stream footer truncated")
	}
	ft := p[off : off+12]
	if string(ft[10:]) != xzFooterMagic {
		return nil, d.errf(off+10, "bad stream footer magic % x", ft[10:])
	}
	if got, stored := crc32.ChecksumIEEE(ft[4:10]), binary.LittleEndian.Uint32(ft); got != stored {
		return nil, d.errf(off, "stream footer CRC32 mismatch (stored %#08x, computed %#08x)", stored, got)
	}
	if !bytes.Equal(ft[8:10], flags) {
		return nil, d.errf(off+8, "stream footer flags % x differ from header flags % x", ft[8:10], flags)
	}
	if bs := (int64(binary.LittleEndian.Uint32(ft[4:])) + 1) * 4; bs != int64(idxSize) {
		return nil, d.errf(off+4, "stream footer backward size %d does not match index size %d", bs, idxSize)
	}
	off += 12

	switch rest := len(p) - off; {
	case rest < 4:
		return nil, d.errf(off, "payload ends %d bytes after the xz stream footer, too few for the 4-byte size trailer", rest)
	case rest > 4:
		return nil, d.errf(off, "%d unexpected bytes between the xz stream footer and the 4-byte size trailer", rest-4)
	}
	if err := checkTrailer(out, d.want, p, d.base, "xz"); err != nil {
		return nil, err
	}
	return out, nil
}

// block decodes the block whose header starts at p[off], appending its data
// to *out; it returns the block's index record and the offset past it.
func (d *xzDecoder) block(off int, checkType byte, checkSize int, out *[]byte) (xzRecord, int, error) {
	p := d.p
	var rec xzRecord
	hsize := (int(p[off]) + 1) * 4
	if off+hsize > len(p) {
		return rec, 0, d.errf(off, "block header (%d bytes) runs past the payload", hsize)
	}
	hdr := p[off : off+hsize]
	if got, stored := crc32.ChecksumIEEE(hdr[:hsize-4]), binary.LittleEndian.Uint32(hdr[hsize-4:]); got != stored {
		return rec, 0, d.errf(off+hsize-4, "block header CRC32 mismatch (stored %#08x, computed %#08x)", stored, got)
	}
	bflags := hdr[1]
	if bflags&0x3c != 0 {
		return rec, 0, d.errf(off+1, "reserved block flags set (%#02x)", bflags)
	}
	hend := off + hsize - 4
	pos := off + 2
	var err error
	compSize, uncompSize := int64(-1), int64(-1)
	if bflags&0x40 != 0 {
		var v uint64
		if v, pos, err = d.vli(pos, hend, "block compressed size"); err != nil {
			return rec, 0, err
		}
		if v == 0 || v > uint64(len(p)) {
			return rec, 0, d.errf(off, "implausible block compressed size %d", v)
		}
		compSize = int64(v)
	}
	if bflags&0x80 != 0 {
		var v uint64
		if v, pos, err = d.vli(pos, hend, "block uncompressed size"); err != nil {
			return rec, 0, err
		}
		if v > uint64(maxOutput) {
			return rec, 0, newErr(ErrTooLarge, d.base+int64(off), "xz block claims %d uncompressed bytes, over the %d-byte limit", v, maxOutput)
		}
		uncompSize = int64(v)
	}

	nf := int(bflags&3) + 1
	ids := make([]uint64, 0, nf)
	var bcjStart uint32
	var dictSize uint32
	for i := range nf {
		var id, psize uint64
		fpos := pos
		if id, pos, err = d.vli(pos, hend, "filter ID"); err != nil {
			return rec, 0, err
		}
		if psize, pos, err = d.vli(pos, hend, "filter properties size"); err != nil {
			return rec, 0, err
		}
		if psize > uint64(hend-pos) {
			return rec, 0, d.errf(fpos, "filter %d properties (%d bytes) run past the block header", i, psize)
		}
		props := p[pos : pos+int(psize)]
		pos += int(psize)
		ids = append(ids, id)
		switch id {
		case xzFilterX86:
			switch len(props) {
			case 0:
			case 4:
				bcjStart = binary.LittleEndian.Uint32(props)
			default:
				return rec, 0, d.errf(fpos, "x86 BCJ filter properties are %d bytes (want 0 or 4)", len(props))
			}
		case xzFilterLZMA2:
			if len(props) != 1 || props[0] > 40 {
				return rec, 0, d.errf(fpos, "bad LZMA2 filter properties % x", props)
			}
			if b := props[0]; b == 40 {
				dictSize = 0xffffffff
			} else {
				dictSize = (2 | uint32(b)&1) << (b/2 + 11)
			}
		}
	}
	if !(len(ids) == 1 && ids[0] == xzFilterLZMA2) && !(len(ids) == 2 && ids[0] == xzFilterX86 && ids[1] == xzFilterLZMA2) {
		names := make([]string, len(ids))
		for i, id := range ids {
			names[i] = xzFilterName(id)
		}
		return rec, 0, &Error{Kind: ErrUnsupported, Offset: d.base + int64(off),
			Msg: fmt.Sprintf("unsupported xz filter chain %q (supported: [LZMA2] or [x86 BCJ, LZMA2])", names)}
	}
	for ; pos < hend; pos++ {
		if p[pos] != 0 {
			return rec, 0, d.errf(pos, "non-zero block header padding")
		}
	}

	// LZMA2 data. Each block starts with a dictionary reset, so the
	// dictionary never needs to exceed the block's output: bound it by the
	// block's uncompressed size if known and by what the size trailer leaves
	// for this block, so that a header claiming a 4 GiB dictionary costs
	// nothing. If the trailer lies, decoding fails or the trailer check does.
	dataStart := off + hsize
	dictCap := min(int64(dictSize), maxOutput, max(d.want-int64(len(*out)), 0))
	if uncompSize >= 0 {
		dictCap = min(dictCap, uncompSize)
	}
	dictCap = max(dictCap, lzma.MinDictCap)
	limit := len(p)
	if compSize >= 0 {
		if int64(dataStart)+compSize > int64(len(p)) {
			return rec, 0, d.errf(dataStart, "block compressed size %d runs past the payload", compSize)
		}
		limit = dataStart + int(compSize)
	}
	br := bytes.NewReader(p[dataStart:limit])
	lr, err := lzma.Reader2Config{DictCap: int(dictCap)}.NewReader2(br)
	if err != nil {
		return rec, 0, &Error{Kind: ErrCorrupt, Offset: d.base + int64(dataStart), Msg: "corrupt xz stream: cannot start LZMA2 decoder", Err: err}
	}
	blockOut := len(*out)
	if err := readAllLimited(lr, out); err != nil {
		consumed := int64(br.Size()) - int64(br.Len())
		var e *Error
		if errors.As(err, &e) {
			return rec, 0, e
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return rec, 0, d.errf(dataStart+int(consumed), "LZMA2 data of block at %#x ends without an end marker", d.base+int64(off))
		}
		return rec, 0, &Error{Kind: ErrCorrupt, Offset: d.base + int64(dataStart) + consumed,
			Msg: fmt.Sprintf("corrupt xz stream: LZMA2 data of block at %#x is invalid", d.base+int64(off)), Err: err}
	}
	data := (*out)[blockOut:]
	consumed := int(br.Size()) - br.Len()
	if compSize >= 0 && int64(consumed) != compSize {
		return rec, 0, d.errf(dataStart+consumed, "LZMA2 data is %d bytes, block header says %d", consumed, compSize)
	}
	if uncompSize >= 0 && int64(len(data)) != uncompSize {
		return rec, 0, d.errf(dataStart+consumed, "block decompressed to %d bytes, its header says %d", len(data), uncompSize)
	}
	if ids[0] == xzFilterX86 {
		DecodeBCJx86(data, bcjStart)
	}

	pos = dataStart + consumed
	for (pos-dataStart)%4 != 0 {
		if pos >= len(p) {
			return rec, 0, d.errf(pos, "block padding truncated")
		}
		if p[pos] != 0 {
			return rec, 0, d.errf(pos, "non-zero block padding")
		}
		pos++
	}
	if pos+checkSize > len(p) {
		return rec, 0, d.errf(pos, "block check field truncated")
	}
	if h := xzNewCheck(checkType); h != nil {
		h.Write(data)
		got := h.Sum(nil)
		stored := p[pos : pos+checkSize]
		if checkType != 0x0a { // CRCs are stored little-endian
			for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
				got[i], got[j] = got[j], got[i]
			}
		}
		if !bytes.Equal(got, stored) {
			return rec, 0, d.errf(pos, "block data check mismatch (stored % x, computed % x)", stored, got)
		}
	}
	pos += checkSize
	rec.unpadded = uint64(hsize + consumed + checkSize)
	rec.uncompressed = uint64(len(data))
	return rec, pos, nil
}

// readAllLimited appends everything from r to *out, failing once the total
// would exceed maxOutput. It fills the capacity *out already has (callers
// preallocate from the size trailer) and only grows it when more data
// actually arrives.
func readAllLimited(r io.Reader, out *[]byte) error {
	b := *out
	defer func() { *out = b }()
	var probe [4096]byte
	for {
		var n int
		var err error
		if len(b) < cap(b) {
			n, err = r.Read(b[len(b):cap(b)])
			b = b[:len(b)+n]
		} else {
			n, err = r.Read(probe[:])
			b = append(b, probe[:n]...)
		}
		if int64(len(b)) > maxOutput {
			b = b[:maxOutput]
			return newErr(ErrTooLarge, -1, "decompressed data exceeds the %d-byte limit", maxOutput)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
