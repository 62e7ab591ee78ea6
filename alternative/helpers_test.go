package alternative

import (
	"encoding/hex"
	"strings"
	"testing"
)

// mem is a test Memory: byte slices at addresses.
type mem struct{ regs []memRegion }

type memRegion struct {
	start uint64
	b     []byte
}

func (m *mem) Text(addr uint64, n int) []byte {
	for _, r := range m.regs {
		if addr >= r.start && addr < r.start+uint64(len(r.b)) {
			off := addr - r.start
			end := min(uint64(len(r.b)), off+uint64(n))
			return r.b[off:end:end]
		}
	}
	return nil
}

func (m *mem) add(start uint64, b []byte) { m.regs = append(m.regs, memRegion{start, b}) }

// hx parses "ff 15 00 00 00 00" (spaces optional).
func hx(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func hexOf(b []byte) string {
	var sb strings.Builder
	for i, c := range b {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(hex.EncodeToString([]byte{c}))
	}
	return sb.String()
}

// Test addresses: text, replacement section and thunks, laid out like
// vmlinux.
const (
	tText     = 0xffffffff81000000
	tRepl     = 0xffffffff83301000
	tThunks   = 0xffffffff81e01580 // __x86_indirect_thunk_array
	tITS      = 0xffffffff81e018e0 // __x86_indirect_its_thunk_array
	tRetThunk = 0xffffffff81e01d30 // __x86_return_thunk
	tITSRet   = 0xffffffff81e01d20 // its_return_thunk
	tSRSORet  = 0xffffffff81e01780 // srso_alias_return_thunk
	tNop      = 0xffffffff81c01b0a // _paravirt_nop
	tBUG      = 0xffffffff81a48130 // paravirt_BUG
	tSaveFl   = 0xffffffff81a45ff0 // native_save_fl
	tSCRet    = 0xffffffff8103eaa0 // __static_call_return
)

func testEnv() *Env {
	return &Env{
		PVOps:              []uint64{0, tSaveFl, tNop, 0},
		ParavirtNop:        tNop,
		ParavirtBUG:        tBUG,
		IndirectThunkArray: tThunks,
		ITSThunkArray:      tITS,
		ReturnThunk:        tRetThunk,
		XReturnThunk:       tRetThunk,
		ITSReturnThunk:     tITSRet,
		StaticCallReturn:   tSCRet,
	}
}

// cpuWith is a CPU with exactly the named bits.
func cpuWith(t testing.TB, names ...string) *CPU {
	t.Helper()
	c := &CPU{Name: "test", ReturnThunk: "__x86_return_thunk"}
	for _, n := range names {
		f, ok := FeatureByName(n)
		if !ok {
			t.Fatalf("unknown feature %s", n)
		}
		c.Features.Set(f)
	}
	return c
}

// rel32 encodes the displacement from an instruction of length n at addr
// to dest.
func rel32(addr uint64, n int, dest uint64) []byte {
	d := uint32(int32(int64(dest - (addr + uint64(n)))))
	return []byte{byte(d), byte(d >> 8), byte(d >> 16), byte(d >> 24)}
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
