package bzimage

// x86 BCJ (branch/call/jump) filter, decoder side, as specified by the xz
// format (filter ID 0x04) and implemented by liblzma's simple/x86.c.
//
// The encoder rewrites the rel32 operand of E8 (CALL) and E9 (JMP) opcodes
// from relative to absolute (operand + position of the next instruction), so
// that calls to the same target compress alike; the decoder subtracts it
// again. Only operands whose most significant byte is 0x00 or 0xFF (near
// targets) are converted, and a small history mask of recently seen E8/E9
// bytes (prevMask) suppresses conversions that are likely not instruction
// starts. The last 4 bytes of a stream are never converted.

// x86MSByte reports whether b is a plausible most significant byte of a
// near rel32 displacement.
func x86MSByte(b byte) bool { return b == 0x00 || b == 0xFF }

var (
	x86MaskAllowed = [8]bool{true, true, true, false, true, false, false, false}
	x86MaskBit     = [8]uint32{0, 1, 2, 2, 3, 3, 3, 3}
)

// DecodeBCJx86 undoes the x86 BCJ filter in place. buf must be the complete
// filtered stream (for xz: one block's whole uncompressed data) and
// startOffset the filter's start offset property (0 unless the xz block
// header says otherwise); the state is not carried between calls.
func DecodeBCJx86(buf []byte, startOffset uint32) {
	bcjX86(buf, startOffset, false)
}

// bcjX86 is the x86 BCJ filter over a complete stream; encode selects the
// direction (the encoder is used by tests).
func bcjX86(buf []byte, startOffset uint32, encode bool) {
	if len(buf) < 5 {
		return
	}
	var prevMask uint32
	prevPos := startOffset - 5 // position of the last E8/E9 seen, "long ago" at first
	limit := len(buf) - 5
	for i := 0; i <= limit; {
		b := buf[i]
		if b != 0xE8 && b != 0xE9 {
			i++
			continue
		}
		pos := startOffset + uint32(i)
		dist := pos - prevPos
		prevPos = pos
		if dist > 5 {
			prevMask = 0
		} else {
			for range dist {
				prevMask &= 0x77
				prevMask <<= 1
			}
		}

		b = buf[i+4]
		if !x86MSByte(b) || !x86MaskAllowed[(prevMask>>1)&7] || prevMask>>1 >= 0x10 {
			i++
			prevMask |= 1
			if x86MSByte(b) {
				prevMask |= 0x10
			}
			continue
		}

		src := uint32(buf[i+1]) | uint32(buf[i+2])<<8 | uint32(buf[i+3])<<16 | uint32(b)<<24
		var dest uint32
		for {
			if encode {
				dest = src + (pos + 5)
			} else {
				dest = src - (pos + 5)
			}
			if prevMask == 0 {
				break
			}
			sh := x86MaskBit[prevMask>>1] * 8
			if !x86MSByte(byte(dest >> (24 - sh))) {
				break
			}
			src = dest ^ (1<<(32-sh) - 1)
		}
		// Sign-extend bit 24 into the most significant byte.
		buf[i+4] = ^byte((dest>>24)&1 - 1)
		buf[i+3] = byte(dest >> 16)
		buf[i+2] = byte(dest >> 8)
		buf[i+1] = byte(dest)
		i += 5
		prevMask = 0
	}
}
