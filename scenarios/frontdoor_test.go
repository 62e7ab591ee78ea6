package scenarios

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

func TestParseTargets(t *testing.T) {
	in := `# a comment
vfs_read
vfs_write+0x10   # trailing comment

p:mygrp/myev do_sys_open+4 $retval
r:kretprobes/x ksys_read
p 0xffffffff81000000
ext4_writepages [ext4]
tcp_sendmsg+12
`
	ts, err := ParseTargets("t.list", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Raw: "vfs_read", Symbol: "vfs_read"},
		{Raw: "vfs_write+0x10", Symbol: "vfs_write", Offset: 16, OwnOffset: true},
		{Raw: "p:mygrp/myev do_sys_open+4 $retval", Symbol: "do_sys_open", Offset: 4, OwnOffset: true, Event: "p:mygrp/myev do_sys_open+4 $retval"},
		{Raw: "r:kretprobes/x ksys_read", Symbol: "ksys_read", Return: true, Event: "r:kretprobes/x ksys_read"},
		{Raw: "p 0xffffffff81000000", Addr: 0xffffffff81000000, Event: "p 0xffffffff81000000"},
		{Raw: "ext4_writepages [ext4]", Symbol: "ext4:ext4_writepages"},
		{Raw: "tcp_sendmsg+12", Symbol: "tcp_sendmsg", Offset: 12, OwnOffset: true},
	}
	if len(ts) != len(want) {
		t.Fatalf("%d targets, want %d: %+v", len(ts), len(want), ts)
	}
	for i := range want {
		ts[i].Source = ""
		if ts[i] != want[i] {
			t.Errorf("target %d: %+v, want %+v", i, ts[i], want[i])
		}
	}
	for _, bad := range []struct{ in, msg string }{
		{"vfs_read+-4\n", `t.list:1: bad offset "-4"`},
		{"\n\nfoo+bar\n", `t.list:3: bad offset "bar"`},
		{"foo+\n", `t.list:1: bad offset ""`},
		{"foo-8\n", "t.list:1: negative offset"},
		{"+5\n", "t.list:1: no symbol before the offset"},
		{"a b c\n", "t.list:1: want SYM[+OFF], NAME [MODULE] or a kprobe_events line"},
		{"foo []\n", "t.list:1: bad module name"},
		{"# only a comment\n\n", "t.list: no targets"},
		{"", "t.list: no targets"},
	} {
		_, err := ParseTargets("t.list", strings.NewReader(bad.in))
		if err == nil || !strings.HasPrefix(err.Error(), bad.msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line starting %q", bad.in, err, bad.msg)
		}
	}
	dir := t.TempDir()
	if _, err := ReadTargetFile(dir, nil); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := ReadTargetFile(filepath.Join(dir, "missing"), nil); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file: %v", err)
	}
}

func FuzzParseTargets(f *testing.F) {
	for _, s := range []string{"vfs_read\n", "foo+0x10\n", "p:g/e sym+4 $retval\n", "x [m]\n", "r5 sym\n", "#\n\n", "a b c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ts, err := ParseTargets("f", strings.NewReader(in))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		for _, tg := range ts {
			if tg.Symbol == "" && tg.Addr == 0 && tg.Event == "" {
				t.Fatalf("target without symbol, address or event line: %+v", tg)
			}
			if strings.TrimSpace(tg.EventLine()) == "" {
				t.Fatalf("empty event line for %+v", tg)
			}
		}
	})
}

// placementCase runs every target kind with a placement and checks each
// probe's address (or the reason it had none) against symbol + the
// placement's offset.
func TestPlacementEveryKind(t *testing.T) {
	img := smallImage(21)
	img.TracedPercent = 100 // every function has __fentry__: after-fentry is +5 everywhere
	dir := t.TempDir()
	list := filepath.Join(dir, "targets")
	if err := os.WriteFile(list, []byte("kprobe_many_func_1\nkprobe_many_func_2 # c\nkprobe_many_func_3+2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fileTargets, err := ReadTargetFile(list, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []TargetKind{TargetsGenerated, TargetsAllFunctions, TargetsTraceable, TargetsFile} {
		for _, pl := range []struct {
			p   Placement
			off int
		}{{PlaceOffset, 5}, {PlaceAfterFentry, 0}} {
			for _, byAddr := range []bool{false, true} {
				if byAddr && kind != TargetsAllFunctions {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/by-address=%v", kind, pl.p, byAddr), func(t *testing.T) {
					o := testManyOptions()
					o.Image, o.N, o.Targets, o.ByAddress = img, 40, kind, byAddr
					o.Traced = true
					o.Placement, o.Offset = pl.p, pl.off
					if kind == TargetsFile {
						o.FileTargets = fileTargets
						// the file's names must exist: generate the sample too
						o.Image.ProbeTargets, o.Image.ProbeTargetsTraced = 10, true
					}
					s := mustSetup(t, o)
					first := firstAddrs(s.Kernel)
					mcount := map[uint64]bool{}
					for _, a := range s.Kernel.McountLocs {
						mcount[a] = true
					}
					// After fentry: +5 past a traced function's __fentry__
					// call, +0 on a notrace one.
					wantFor := func(entry uint64) uint32 {
						if pl.p == PlaceOffset {
							return uint32(pl.off)
						}
						if mcount[entry] {
							return 5
						}
						return 0
					}
					starts := map[uint64]bool{}
					for _, f := range s.Kernel.Functions() {
						starts[f.Addr] = true
					}
					n := 0
					for _, tg := range s.Targets {
						if s.Kernel.ModuleAt(tg.Addr) != nil || strings.Contains(tg.Symbol, ":") {
							continue // module functions: checked by name below
						}
						if tg.OwnOffset {
							if tg.Offset != 2 {
								t.Fatalf("%s: own offset %d replaced", tg.Raw, tg.Offset)
							}
							continue
						}
						if byAddr {
							switch {
							case pl.p == PlaceOffset && starts[tg.Addr-5]:
							case pl.p == PlaceAfterFentry && starts[tg.Addr-5] && mcount[tg.Addr-5]:
							case pl.p == PlaceAfterFentry && starts[tg.Addr] && !mcount[tg.Addr]:
								continue
							default:
								t.Fatalf("%s: address %#x is no function entry + the placement", tg.Raw, tg.Addr)
							}
							n++
							continue
						}
						if want := wantFor(first(tg.Symbol)); tg.Offset != want {
							t.Fatalf("%s: offset %d, want %d", tg.Raw, tg.Offset, want)
						}
						if tg.Offset != 0 {
							n++
						}
					}
					if n == 0 {
						t.Fatal("no target moved by the placement")
					}
					// And the registered probes sit there.
					if len(s.Targets) > 300 {
						var some []Target
						for i := len(s.Targets) - 1; i >= 0 && len(some) < 300; i -= 7 {
							some = append(some, s.Targets[i])
						}
						s.Targets = some
					}
					s.Opts.Via = doors.ViaRegisterKprobe
					rep, err := RunMany(s, []RunSpec{{"none", 0}}, machine.Wire, sim.DefaultCosts(), "", nil)
					if err != nil {
						t.Fatal(err)
					}
					checked := 0
					for i, pr := range rep.Runs[0].Results {
						tg := s.Targets[i]
						if pr.Code != 0 || tg.OwnOffset || strings.Contains(tg.Symbol, ":") {
							continue
						}
						if tg.Symbol == "" {
							if pr.Addr != tg.Addr {
								t.Fatalf("%s: probe at %#x", tg.Raw, pr.Addr)
							}
							checked++
							continue
						}
						if a := first(tg.Symbol); pr.Addr != a+uint64(wantFor(a)) {
							t.Fatalf("%s: probe at %#x, want %#x+%d", tg.Raw, pr.Addr, a, wantFor(a))
						}
						checked++
					}
					if checked == 0 {
						t.Fatal("no registered probe to check")
					}
				})
			}
		}
	}
}

// TestFrontDoorsSameDecisions: through every front door, every ablation
// run (and the series and all) reaches the decisions and reasons of
// upstream, probe by probe.
func TestFrontDoorsSameDecisions(t *testing.T) {
	o := testManyOptions()
	o.Image = smallImage(22)
	o.Targets, o.Placement, o.Offset = TargetsTraceable, PlaceOffset, 5
	o.OptimizeEvery = 13
	base := mustSetup(t, o)
	if len(base.Targets) > 700 {
		base.Targets = base.Targets[:700]
	}
	for _, via := range []doors.Via{doors.ViaKprobeEvents, doors.ViaPerfKprobe, doors.ViaRegisterKprobe} {
		for _, en := range []doors.EnableMode{doors.EnableEach, doors.EnableGroup} {
			if via != doors.ViaKprobeEvents && en != doors.EnableEach {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s", via, en), func(t *testing.T) {
				s := *base
				s.Opts.Via = via
				s.Opts.LinesPerWrite = 7
				if via == doors.ViaKprobeEvents {
					s.Opts.Enable = en
				}
				rep := checkSameDecisions(t, &s, allSpecs(), "")
				r := rep.Runs[0]
				if r.Registered == 0 || r.Optimized == 0 {
					t.Fatalf("registered %d optimized %d: the test exercises nothing", r.Registered, r.Optimized)
				}
				for _, run := range rep.Runs[1:] {
					if run.WhyDigest != r.WhyDigest {
						t.Fatalf("%s: reasons differ from none", run.Name)
					}
				}
			})
		}
	}
}

// TestLinesPerWrite: a failing line ends its write; the lines after it in
// the same write are not attempted, the next write goes on.
func TestLinesPerWrite(t *testing.T) {
	o := testManyOptions()
	o.Image = smallImage(23)
	o.Image.ProbeTargets, o.Image.ProbeTargetsTraced = 20, true
	var lines []string
	for i := 0; i < 10; i++ {
		lines = append(lines, synth.ProbeTargetName(i))
	}
	lines[3] = "no_such_function_xyz"
	ts, err := ParseTargets("l", strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	o.Targets, o.FileTargets, o.Via, o.LinesPerWrite = TargetsFile, ts, doors.ViaKprobeEvents, 5
	s := mustSetup(t, o)
	rep, err := RunMany(s, []RunSpec{{"none", 0}}, machine.Wire, sim.DefaultCosts(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, pr := range rep.Runs[0].Results {
		got = append(got, pr.Code)
	}
	want := []int{0, 0, 0, 2, -1, 0, 0, 0, 0, 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
}

func TestFitLinear(t *testing.T) {
	xs := []float64{500, 1500, 2500, 3500}
	ys := []float64{1100, 1300, 1500, 1700} // 1000 + 0.2·N
	f := fitLinear(xs, ys, 4000)
	if f.A < 999.9 || f.A > 1000.1 || f.B < 0.19999 || f.B > 0.20001 || f.R2 < 0.9999 {
		t.Fatalf("fit %+v", f)
	}
	if want := 800.0 / 1800; f.Share < want-1e-9 || f.Share > want+1e-9 {
		t.Fatalf("share %v, want %v", f.Share, want)
	}
}
