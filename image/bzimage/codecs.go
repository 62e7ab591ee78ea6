package bzimage

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// decodeZstd decodes a zstd payload: one or more frames followed by the
// 4-byte size trailer (scripts/Makefile.lib cmd_zstd22 + size_append).
func decodeZstd(p []byte, base int64) ([]byte, error) {
	want, err := sizeTrailer(p, base, "zstd")
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(uint64(maxOutput)),
		zstd.WithDecoderMaxWindow(uint64(min(maxOutput, 1<<31))),
	)
	if err != nil {
		return nil, &Error{Kind: ErrCorrupt, Offset: -1, Msg: "cannot create zstd decoder", Err: err}
	}
	defer dec.Close()
	out, err := dec.DecodeAll(p[:len(p)-4], make([]byte, 0, sizeHint(want, len(p))))
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, &Error{Kind: ErrTooLarge, Offset: base, Msg: fmt.Sprintf("zstd stream needs more than the %d-byte limit", maxOutput), Err: err}
		}
		return nil, &Error{Kind: ErrCorrupt, Offset: base, Msg: "corrupt zstd stream", Err: err}
	}
	if err := checkTrailer(out, want, p, base, "zstd"); err != nil {
		return nil, err
	}
	return out, nil
}

// decodeGzip decodes a gzip payload: a single member, whose ISIZE field is
// the size trailer (cmd_gzip has no size_append).
func decodeGzip(p []byte, base int64) ([]byte, error) {
	want, err := sizeTrailer(p, base, "gzip")
	if err != nil {
		return nil, err
	}
	br := bytes.NewReader(p)
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, &Error{Kind: ErrCorrupt, Offset: base, Msg: "corrupt gzip stream: bad member header", Err: err}
	}
	zr.Multistream(false)
	out := make([]byte, 0, sizeHint(want, len(p)))
	if err := readAllLimited(zr, &out); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		consumed := br.Size() - int64(br.Len())
		return nil, &Error{Kind: ErrCorrupt, Offset: base + consumed, Msg: "corrupt gzip stream", Err: err}
	}
	if rest := br.Len(); rest != 0 {
		return nil, newErr(ErrCorrupt, base+br.Size()-int64(rest), "corrupt gzip payload: %d bytes after the gzip member", rest)
	}
	if err := checkTrailer(out, want, p, base, "gzip"); err != nil {
		return nil, err
	}
	return out, nil
}

const (
	lz4LegacyMagic     = 0x184c2102
	lz4LegacyBlockSize = 8 << 20 // uncompressed size of every block but the last
)

// decodeLZ4Legacy decodes a legacy-frame LZ4 payload (lz4 -l, as
// scripts/Makefile.lib cmd_lz4 makes it): the magic, then blocks each
// preceded by their compressed size (u32 LE), independently compressed to at
// most 8 MiB; a repeated magic starts a new frame; the last 4 bytes are the
// size trailer.
func decodeLZ4Legacy(p []byte, base int64) ([]byte, error) {
	want, err := sizeTrailer(p, base, "lz4")
	if err != nil {
		return nil, err
	}
	body := p[:len(p)-4]
	out := make([]byte, 0, sizeHint(want, len(p)))
	off := 4 // magic checked by the caller via detectCodec
	if len(body) < 4 || binary.LittleEndian.Uint32(body) != lz4LegacyMagic {
		return nil, newErr(ErrCorrupt, base, "corrupt lz4 stream: no legacy frame magic")
	}
	for off < len(body) {
		if len(body)-off < 4 {
			return nil, newErr(ErrCorrupt, base+int64(off), "corrupt lz4 stream: %d stray bytes where a block size was expected", len(body)-off)
		}
		n := binary.LittleEndian.Uint32(body[off:])
		if n == lz4LegacyMagic {
			off += 4
			continue
		}
		if int64(n) > int64(len(body)-off-4) {
			return nil, newErr(ErrCorrupt, base+int64(off), "corrupt lz4 stream: block of %d bytes runs past the payload (%d bytes left)", n, len(body)-off-4)
		}
		blk := body[off+4 : off+4+int(n)]
		room := min(int64(lz4LegacyBlockSize), maxOutput-int64(len(out)))
		if room <= 0 {
			return nil, newErr(ErrTooLarge, base+int64(off), "decompressed data exceeds the %d-byte limit", maxOutput)
		}
		out = growTo(out, len(out)+int(room))
		k, err := lz4.UncompressBlock(blk, out[len(out):len(out)+int(room)])
		if err != nil {
			if room < lz4LegacyBlockSize {
				// Too little room under the limit, or corrupt? Decode aside to tell.
				if _, err2 := lz4.UncompressBlock(blk, make([]byte, lz4LegacyBlockSize)); err2 == nil {
					return nil, newErr(ErrTooLarge, base+int64(off), "decompressed data exceeds the %d-byte limit", maxOutput)
				}
			}
			return nil, &Error{Kind: ErrCorrupt, Offset: base + int64(off), Msg: "corrupt lz4 stream: invalid block", Err: err}
		}
		out = out[:len(out)+k]
		off += 4 + int(n)
	}
	if err := checkTrailer(out, want, p, base, "lz4"); err != nil {
		return nil, err
	}
	return out, nil
}

// growTo makes sure cap(b) >= n, keeping len(b).
func growTo(b []byte, n int) []byte {
	if cap(b) >= n {
		return b
	}
	return append(b[:cap(b)], make([]byte, n-cap(b))...)[:len(b)]
}
