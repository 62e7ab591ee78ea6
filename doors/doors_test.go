package doors

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// TestEventLine: the kprobe_events line of each probe form, named and
// not, and a given line written verbatim.
func TestEventLine(t *testing.T) {
	cases := []struct {
		p     Probe
		event string
		want  string
	}{
		{Probe{Symbol: "vfs_read"}, "", "p vfs_read"},
		{Probe{Symbol: "vfs_read", Offset: 5}, "", "p vfs_read+5"},
		{Probe{Symbol: "vfs_read", Return: true}, "", "r vfs_read"},
		{Probe{Addr: 0xffffffff81000010}, "", "p 0xffffffff81000010"},
		{Probe{Symbol: "mod:fn", Offset: 3, Addr: 0x1234}, "", "p mod:fn+3"},
		{Probe{Symbol: "vfs_read", Offset: 5}, "soak/e3", "p:soak/e3 vfs_read+5"},
		{Probe{Addr: 0x10, Return: true}, "g/e", "r:g/e 0x10"},
		{Probe{Symbol: "x", Line: "p:kprobes/r_sched vfs_read+5"}, "g/e", "p:kprobes/r_sched vfs_read+5"},
	}
	for _, c := range cases {
		if got := c.p.EventLine(c.event); got != c.want {
			t.Errorf("%+v.EventLine(%q) = %q, want %q", c.p, c.event, got, c.want)
		}
	}
}

// TestProbeForms: Location, EventLine and Kprobe agree on where a probe
// is: by symbol and offset when it has a symbol, else by address, and
// only an entry probe carries a post handler.
func TestProbeForms(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := Probe{
			Symbol: rapid.SampledFrom([]string{"", "vfs_read", "m:f"}).Draw(t, "sym"),
			Offset: rapid.Uint32Range(0, 64).Draw(t, "off"),
			Addr:   rapid.Uint64().Draw(t, "addr"),
			Return: rapid.Bool().Draw(t, "ret"),
			Post:   rapid.Bool().Draw(t, "post"),
		}
		sym, off := p.Location()
		loc := fmt.Sprintf("%#x", off)
		if sym != "" {
			if off != uint64(p.Offset) {
				t.Fatalf("symbol probe located at offset %d, want %d", off, p.Offset)
			}
			loc = sym
			if off != 0 {
				loc = fmt.Sprintf("%s+%d", sym, off)
			}
		} else if off != p.Addr {
			t.Fatalf("address probe located at %#x, want %#x", off, p.Addr)
		}
		kind := map[bool]string{false: "p", true: "r"}[p.Return]
		if got, want := p.EventLine("g/e"), kind+":g/e "+loc; got != want {
			t.Fatalf("EventLine %q, want %q", got, want)
		}
		kp, rp := p.Kprobe()
		if (rp != nil) != p.Return || rp != nil && &rp.Kp != kp {
			t.Fatalf("Kprobe: return probe %v, kretprobe %v", p.Return, rp != nil)
		}
		if kp.SymbolName != p.Symbol || kp.Offset != p.Offset || kp.Addr != p.Addr || kp.HasPostHandler != (p.Post && !p.Return) {
			t.Fatalf("Kprobe %+v for %+v", kp, p)
		}
	})
}

// TestViaTraced: only the tracefs and perf doors go through the tracing
// layer.
func TestViaTraced(t *testing.T) {
	for via, want := range map[Via]bool{ViaRegisterKprobes: false, ViaRegisterKprobe: false, ViaKprobeEvents: true, ViaPerfKprobe: true} {
		if via.Traced() != want {
			t.Errorf("%s: Traced %v, want %v", via, via.Traced(), want)
		}
	}
}
