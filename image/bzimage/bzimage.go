// Package bzimage turns an x86 bzImage (vmlinuz) into the vmlinux ELF bytes
// it carries.
//
// A bzImage is a real-mode setup part ((setup_sects+1)*512 bytes, with the
// "HdrS" boot-protocol header at 0x202) followed by the protected-mode part,
// inside which payload_offset/payload_length (boot protocol >= 2.08) locate
// the compressed vmlinux. The kernel build appends the uncompressed size as a
// 4-byte little-endian value to the compressed stream (for gzip this is the
// member's own ISIZE field); Decompress uses it as a size hint and checks it.
//
// Supported payloads: xz (LZMA2, optionally behind the x86 BCJ filter, as
// Debian's generic kernels are built), zstd, gzip and legacy-frame LZ4.
// Everything is pure Go; no external tool is run.
package bzimage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Offsets of the fields of the x86 boot protocol setup header
// (Documentation/arch/x86/boot.rst) used here, as file offsets.
const (
	offSetupSects    = 0x1f1
	offBootFlag      = 0x1fe
	offHeaderMagic   = 0x202
	offVersion       = 0x206
	offKernelVersion = 0x20e
	offPayloadOffset = 0x248
	offPayloadLength = 0x24c
	setupHeaderEnd   = 0x250 // we need everything up to payload_length

	minProtocolWithPayload = 0x0208
)

// Info describes a bzImage as read from its setup header.
type Info struct {
	SetupSects      int    // setup_sects as used (a stored 0 means 4)
	ProtectedOffset int64  // file offset of the protected-mode part: (SetupSects+1)*512
	PayloadOffset   uint32 // payload_offset, relative to ProtectedOffset
	PayloadLength   uint32 // payload_length, including the 4-byte size trailer
	Codec           string // "xz", "zstd", "gzip", "lz4"; or "bzip2", "lzma", "lzo" (recognised, unsupported); "" if unknown
	Version         string // kernel_version string from the setup header, "" if absent
}

// PayloadStart is the file offset of the first byte of the compressed payload.
func (in Info) PayloadStart() int64 { return in.ProtectedOffset + int64(in.PayloadOffset) }

// PayloadEnd is the file offset just past the compressed payload.
func (in Info) PayloadEnd() int64 { return in.PayloadStart() + int64(in.PayloadLength) }

// Sentinel errors; every error returned by this package is an *Error that
// matches (errors.Is) exactly one of them.
var (
	ErrNotBzImage  = errors.New("not a bzImage")
	ErrTruncated   = errors.New("truncated bzImage")
	ErrUnsupported = errors.New("unsupported bzImage payload")
	ErrCorrupt     = errors.New("corrupt payload")
	ErrTooLarge    = errors.New("decompressed size over limit")
)

// Error is the error type of this package.
type Error struct {
	File   string // file name given to Decompress; "" from ParseSetupHeader
	Kind   error  // one of the Err* sentinels
	Offset int64  // file offset where the problem was found, -1 if not meaningful
	Msg    string // complete description, without the file name
	Err    error  // underlying cause from a decoder library, if any
}

func (e *Error) Error() string {
	var b bytes.Buffer
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " (at file offset %#x)", e.Offset)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is match both the sentinel kind and the cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

func newErr(kind error, off int64, format string, args ...any) *Error {
	return &Error{Kind: kind, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// IsBzImage reports whether b starts like a bzImage: a boot-protocol header
// ("HdrS" at 0x202) with the 0xAA55 boot flag.
func IsBzImage(b []byte) bool {
	return len(b) >= offHeaderMagic+4 &&
		string(b[offHeaderMagic:offHeaderMagic+4]) == "HdrS" &&
		binary.LittleEndian.Uint16(b[offBootFlag:]) == 0xAA55
}

// ParseSetupHeader parses the boot-protocol setup header of a bzImage held
// in b (the whole file, so that the payload bounds can be checked).
func ParseSetupHeader(b []byte) (Info, error) {
	var in Info
	if len(b) < setupHeaderEnd {
		if len(b) >= offHeaderMagic+4 && string(b[offHeaderMagic:offHeaderMagic+4]) != "HdrS" {
			return in, newErr(ErrNotBzImage, -1, "not a bzImage (no HdrS magic at %#x)", offHeaderMagic)
		}
		return in, newErr(ErrTruncated, -1, "truncated bzImage: file is %d bytes, too short for the setup header (need %d)", len(b), setupHeaderEnd)
	}
	if string(b[offHeaderMagic:offHeaderMagic+4]) != "HdrS" {
		return in, newErr(ErrNotBzImage, -1, "not a bzImage (no HdrS magic at %#x)", offHeaderMagic)
	}
	proto := binary.LittleEndian.Uint16(b[offVersion:])
	if proto < minProtocolWithPayload {
		return in, newErr(ErrUnsupported, offVersion, "boot protocol %d.%02d is older than 2.08: no payload_offset/payload_length fields", proto>>8, proto&0xff)
	}
	in.SetupSects = int(b[offSetupSects])
	if in.SetupSects == 0 {
		in.SetupSects = 4
	}
	in.ProtectedOffset = int64(in.SetupSects+1) * 512
	in.PayloadOffset = binary.LittleEndian.Uint32(b[offPayloadOffset:])
	in.PayloadLength = binary.LittleEndian.Uint32(b[offPayloadLength:])
	in.Version = kernelVersion(b)

	if in.PayloadLength == 0 {
		return in, newErr(ErrCorrupt, offPayloadLength, "bzImage has payload_length 0")
	}
	if end := in.PayloadEnd(); end > int64(len(b)) {
		return in, newErr(ErrTruncated, -1,
			"truncated bzImage: payload ends at %d past file size %d (protected-mode start %#x + payload_offset %#x + payload_length %#x)",
			end, len(b), in.ProtectedOffset, in.PayloadOffset, in.PayloadLength)
	}
	in.Codec = detectCodec(b[in.PayloadStart():in.PayloadEnd()])
	return in, nil
}

// kernelVersion returns the NUL-terminated string kernel_version points to
// (its value + 0x200 is a file offset), or "" if it is absent or implausible.
func kernelVersion(b []byte) string {
	p := int(binary.LittleEndian.Uint16(b[offKernelVersion:]))
	if p == 0 {
		return ""
	}
	p += 0x200
	if p >= len(b) {
		return ""
	}
	s := b[p:min(len(b), p+256)]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	} else {
		return ""
	}
	for _, c := range s {
		if c < 0x20 || c > 0x7e {
			return ""
		}
	}
	return string(s)
}

var codecMagics = []struct {
	name  string
	magic string
}{
	{"xz", "\xfd7zXZ\x00"},
	{"zstd", "\x28\xb5\x2f\xfd"},
	{"gzip", "\x1f\x8b"},
	{"lz4", "\x02\x21\x4c\x18"},
	{"bzip2", "BZh"},
	{"lzo", "\x89LZO"},
	{"lzma", "\x5d\x00\x00"},
}

func detectCodec(p []byte) string {
	for _, m := range codecMagics {
		if bytes.HasPrefix(p, []byte(m.magic)) {
			return m.name
		}
	}
	return ""
}

// maxOutput bounds the decompressed size (and so the memory Decompress may
// allocate); a variable so that fuzzers can lower it.
var maxOutput int64 = 1 << 30

// Decompress extracts the vmlinux from the bzImage b. name is used in error
// messages only (typically the file name). On error the returned Info holds
// whatever of the header could be parsed.
func Decompress(name string, b []byte) ([]byte, Info, error) {
	in, err := ParseSetupHeader(b)
	if err != nil {
		return nil, in, withFile(err, name)
	}
	start := in.PayloadStart()
	p := b[start:in.PayloadEnd()]

	var out []byte
	switch in.Codec {
	case "xz":
		out, err = decodeXZ(p, start)
	case "zstd":
		out, err = decodeZstd(p, start)
	case "gzip":
		out, err = decodeGzip(p, start)
	case "lz4":
		out, err = decodeLZ4Legacy(p, start)
	case "":
		err = newErr(ErrUnsupported, start, "unknown payload compression (magic % x); supported: xz, zstd, gzip, lz4 (legacy frame)", p[:min(len(p), 6)])
	default:
		err = newErr(ErrUnsupported, start, "payload compressed with %s, which is not supported (supported: xz, zstd, gzip, lz4)", in.Codec)
	}
	if err != nil {
		return nil, in, withFile(err, name)
	}
	return out, in, nil
}

func withFile(err error, name string) error {
	var e *Error
	if errors.As(err, &e) {
		e.File = name
		return e
	}
	return &Error{File: name, Kind: ErrCorrupt, Offset: -1, Msg: "decompression failed", Err: err}
}

// sizeTrailer returns the uncompressed size the kernel build appended to the
// payload (its last 4 bytes, little-endian). It is only trusted as far as
// sizeHint allows and is checked after decoding.
func sizeTrailer(p []byte, base int64, codec string) (int64, error) {
	if len(p) < 4 {
		return 0, newErr(ErrCorrupt, base, "corrupt %s payload: %d bytes, too short for the 4-byte size trailer", codec, len(p))
	}
	return int64(binary.LittleEndian.Uint32(p[len(p)-4:])), nil
}

// sizeHint is the capacity to preallocate for the output: the trailer's
// size unless that is implausible for the compressed size (or over the
// limit), in which case the output grows as needed.
func sizeHint(want int64, compressed int) int {
	return int(min(want, maxOutput, 64*int64(compressed)+1<<20))
}

func checkTrailer(out []byte, want int64, p []byte, base int64, codec string) error {
	if uint32(len(out)) != uint32(want) {
		return newErr(ErrCorrupt, base+int64(len(p))-4,
			"%s payload decompressed to %d bytes but its size trailer says %d", codec, len(out), want)
	}
	return nil
}
