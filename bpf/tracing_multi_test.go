package bpf_test

import (
	"errors"
	"testing"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// tracingFuncs picks n functions of e's image that kallsyms and ftrace
// know (unique names, an ftrace record, one per address: BTF has one FUNC
// per function body, not one per alias or section marker), with BTF ids
// 1..n.
func tracingFuncs(t *testing.T, e *env, n, nargs int) []bpf.TracingMultiFunc {
	t.Helper()
	count := map[string]int{}
	for _, s := range e.k.Symbols {
		count[s.Name]++
	}
	var out []bpf.TracingMultiFunc
	seen := map[uint64]bool{}
	for _, s := range e.k.Functions() {
		if len(out) == n {
			break
		}
		if count[s.Name] == 1 && !seen[s.Addr] && e.ft.Location(nil, s.Addr) != 0 {
			seen[s.Addr] = true
			out = append(out, bpf.TracingMultiFunc{ID: uint32(len(out) + 1), Name: s.Name, NrArgs: nargs})
		}
	}
	if len(out) < n {
		t.Fatalf("only %d traceable functions", len(out))
	}
	return out
}

// TestTracingMultiGenerations: the tracing multi link is 7.3's; 6.1.192
// and 6.12.117 have no BPF_TRACE_FENTRY_MULTI (-EOPNOTSUPP, nothing
// counted past the syscall).
func TestTracingMultiGenerations(t *testing.T) {
	e := bootEnv(t, image.Gen73)
	funcs := tracingFuncs(t, e, 4, 2)
	for _, tc := range []struct {
		gen  image.Generation
		want error
	}{
		{image.Gen61, errno.EOPNOTSUPP},
		{image.Gen612, errno.EOPNOTSUPP},
		{image.Gen73, nil},
	} {
		tm := bpf.NewTracingMulti(tc.gen, e.syms, e.ft, 3)
		_, err := tm.Attach(sim.NewCounters(false), funcs)
		if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
			t.Errorf("%s: err %v, want %v", tc.gen, err, tc.want)
		}
	}
}

// TestTracingMultiCounts: the per-function work of one fentry.multi link
// over K functions, counted per component (phase), at small K.
func TestTracingMultiCounts(t *testing.T) {
	e := bootEnv(t, image.Gen73)
	for _, tc := range []struct {
		k, nargs int
		batches  uint64
	}{
		{1, 0, 1},
		{5, 3, 1},
		{300, 6, 2}, // more than TEXT_POKE_ARRAY_MAX sites: two flushes
	} {
		funcs := tracingFuncs(t, e, tc.k, tc.nargs)
		// Duplicated ids are refused after the sort (check_dup_ids).
		if tc.k > 1 {
			dup := append([]bpf.TracingMultiFunc(nil), funcs...)
			dup[1].ID = dup[0].ID
			if _, err := bpf.NewTracingMulti(image.Gen73, e.syms, e.ft, 3).Attach(sim.NewCounters(false), dup); !errors.Is(err, errno.EINVAL) {
				t.Errorf("K=%d duplicate id: err %v, want EINVAL", tc.k, err)
			}
		}
		c := sim.NewCounters(false)
		st, err := bpf.NewTracingMulti(image.Gen73, e.syms, e.ft, 3).Attach(c, funcs)
		if err != nil {
			t.Fatalf("K=%d: %v", tc.k, err)
		}
		K := uint64(tc.k)
		insns := uint64(bpf.TrampolineInsns(tc.nargs))
		for _, w := range []struct {
			ph   sim.Phase
			op   sim.Op
			want uint64
		}{
			{bpf.PhaseTMBTF, bpf.OpBTFTypeByID, K * uint64(7+3*tc.nargs)},
			{bpf.PhaseTMBTF, bpf.OpBTFSetProbe, (3 + 14*9) * K},
			{bpf.PhaseTMBTF, bpf.OpBTFParamSuffix, K * uint64(3*tc.nargs)},
			{bpf.PhaseTMBTF, ftrace.OpLocationCall, K},
			{bpf.PhaseTMTrampoline, ftrace.OpLocationCall, 2 * K},
			{bpf.PhaseTMTrampoline, bpf.OpMutex, 2 * K},
			{bpf.PhaseTMJIT, bpf.OpJITInsn, 2 * K * insns},
			{bpf.PhaseTMJIT, bpf.OpJITScratch, K},
			{bpf.PhaseTMImage, bpf.OpPercpuRef, K},
			{bpf.PhaseTMImage, bpf.OpKsymName, K},
			{bpf.PhaseTMImage, bpf.OpPackNew, 0}, // the program's pack has room
			{bpf.PhaseTMFtrace, ftrace.OpHashAdd, 2 * K},
			{bpf.PhaseTMFtrace, ftrace.OpRecMatch, K},
			{bpf.PhaseTMFtrace, ftrace.OpDirectRegister, 1},
			{bpf.PhaseTMFtrace, ftrace.OpUpdateTraceFunc, 1},
			{bpf.PhaseTMTextPoke, ftrace.OpReplaceSite, K},
			{bpf.PhaseTMTextPoke, ftrace.OpTextPokeBatch, tc.batches},
			{bpf.PhaseTMTextPoke, ftrace.OpReplaceCheck, uint64(2 * e.ft.NumRecords())},
			{bpf.PhaseTMLink, bpf.OpLinkPrime, 1},
			{bpf.PhaseTMLink, bpf.OpSyscall, 1},
		} {
			if got := c.Get(w.ph, w.op); got != w.want {
				t.Errorf("K=%d nargs=%d: %s in %s = %d, want %d", tc.k, tc.nargs, w.op.Name(), w.ph.Name(), got, w.want)
			}
		}
		if c.PhaseTotal(bpf.PhaseTMKallsyms) == 0 {
			t.Errorf("K=%d: no kallsyms_lookup_name counted", tc.k)
		}
		if c.PhaseTotal(sim.PhaseOther) != 0 {
			t.Errorf("K=%d: %d ops outside the model's phases", tc.k, c.PhaseTotal(sim.PhaseOther))
		}
		if st.Trampolines != tc.k || st.Direct.Sites != tc.k || st.ImageBytes != bpf.TrampolineBytes(tc.nargs) {
			t.Errorf("K=%d: stats %+v", tc.k, st)
		}
	}
}
