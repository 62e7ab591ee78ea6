package ktab

import "fmt"

// MaxNamesOffset is the largest record offset a 3-byte
// kallsyms_names_offsets entry can hold.
const MaxNamesOffset = 1<<24 - 1

// NextRecord decodes the length header of the kallsyms_names record at
// off and returns the offset of the next record: one hop of
// kernel/kallsyms.c:get_symbol_offset.
func NextRecord(names []byte, off int) (int, error) {
	if off < 0 || off >= len(names) {
		return 0, fmt.Errorf("ktab: record offset %d outside kallsyms_names (%d bytes)", off, len(names))
	}
	l, h := int(names[off]), 1
	if l&0x80 != 0 {
		if off+1 >= len(names) {
			return 0, fmt.Errorf("ktab: truncated 2-byte header at %d", off)
		}
		l, h = l&0x7f|int(names[off+1])<<7, 2
	}
	next := off + h + l
	if next > len(names) {
		return 0, fmt.Errorf("ktab: record at %d (length %d) runs past kallsyms_names (%d bytes)", off, l, len(names))
	}
	return next, nil
}

// recordOffsets returns the start of every record, every stride-th one.
func (t *Tables) recordOffsets(stride int) ([]int, error) {
	out := make([]int, 0, (t.NumSyms+stride-1)/stride)
	off := 0
	for i := 0; i < t.NumSyms; i++ {
		if i%stride == 0 {
			if off > MaxNamesOffset {
				return nil, fmt.Errorf("ktab: record %d at offset %#x does not fit a 24-bit kallsyms_names_offsets entry (kallsyms_names is %d bytes)", i, off, len(t.Names))
			}
			out = append(out, off)
		}
		var err error
		if off, err = NextRecord(t.Names, off); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func put24(b []byte, offs []int) []byte {
	for _, o := range offs {
		b = append(b, byte(o>>16), byte(o>>8), byte(o))
	}
	return b
}

// NamesOffsets is the kallsyms_names_offsets table of the 3-byte-index
// patch (J2): for every record i in kallsyms index order, its byte offset
// in kallsyms_names as 3 bytes, most significant first (3·N bytes). It
// fails when a record starts beyond MaxNamesOffset (a names blob past
// 16 MiB).
func (t *Tables) NamesOffsets() ([]byte, error) {
	offs, err := t.recordOffsets(1)
	if err != nil {
		return nil, err
	}
	return put24(make([]byte, 0, 3*len(offs)), offs), nil
}

// NamesOffsetsStride2 is the half-size index (D. Laight's "stride 2"):
// entry k, 3 bytes most significant first exactly like NamesOffsets, is
// the offset of record 2k; there are ceil(N/2) entries (3·ceil(N/2)
// bytes). Record 2k+1 is reached from entry k by one header hop
// (NextRecord). This is NamesOffsets with the odd entries removed, so the
// same ld3 decoder serves both and the index of an entry is i>>1; it is
// the layout whose size is the review's 1.5·N bytes (docs/series.md §2).
func (t *Tables) NamesOffsetsStride2() ([]byte, error) {
	offs, err := t.recordOffsets(2)
	if err != nil {
		return nil, err
	}
	return put24(make([]byte, 0, 3*len(offs)), offs), nil
}

// BuildOffsets32 builds the run-time table of the dynamic-table proposal
// from kallsyms_names in one sequential pass: entry k is the u32 byte
// offset of record k·stride (stride 1: N entries, 4·N bytes; stride 2:
// ceil(N/2) entries). The pass decodes every record header once, so hops
// is N; the last hop also checks that the records end exactly at the end
// of names. stride must be 1 or 2.
func BuildOffsets32(names []byte, numSyms, stride int) (tbl []uint32, hops int, err error) {
	if stride != 1 && stride != 2 {
		return nil, 0, fmt.Errorf("ktab: stride %d: want 1 or 2", stride)
	}
	if numSyms < 0 {
		return nil, 0, fmt.Errorf("ktab: negative symbol count %d", numSyms)
	}
	tbl = make([]uint32, 0, (numSyms+stride-1)/stride)
	off := 0
	for i := 0; i < numSyms; i++ {
		if i%stride == 0 {
			if uint64(off) > 1<<32-1 {
				return nil, hops, fmt.Errorf("ktab: record %d offset %d exceeds 32 bits", i, off)
			}
			tbl = append(tbl, uint32(off))
		}
		if off, err = NextRecord(names, off); err != nil {
			return nil, hops, err
		}
		hops++
	}
	if off != len(names) {
		return nil, hops, fmt.Errorf("ktab: %d records end at %d, kallsyms_names is %d bytes", numSyms, off, len(names))
	}
	return tbl, hops, nil
}
