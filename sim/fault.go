package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// FaultPoint is a place where the modelled kernel can be told to fail, such
// as the late-init allocation of the jump-label index. Points are registered
// at package initialisation by the subsystem that owns them.
type FaultPoint uint16

// FaultInfo describes a fault point.
type FaultInfo struct {
	Name string
	Doc  string
}

var faultReg struct {
	mu    sync.Mutex
	infos []FaultInfo
	idx   map[string]FaultPoint
}

// NewFaultPoint registers a fault point. It panics on a duplicate name.
func NewFaultPoint(name, doc string) FaultPoint {
	faultReg.mu.Lock()
	defer faultReg.mu.Unlock()
	if faultReg.idx == nil {
		faultReg.idx = map[string]FaultPoint{}
	}
	if _, dup := faultReg.idx[name]; dup {
		panic("sim: duplicate fault point " + name)
	}
	p := FaultPoint(len(faultReg.infos))
	faultReg.infos = append(faultReg.infos, FaultInfo{name, doc})
	faultReg.idx[name] = p
	return p
}

// FaultPoints lists every registered fault point, sorted by name.
func FaultPoints() []FaultInfo {
	faultReg.mu.Lock()
	defer faultReg.mu.Unlock()
	out := append([]FaultInfo(nil), faultReg.infos...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Name returns the fault point's name.
func (p FaultPoint) Name() string {
	faultReg.mu.Lock()
	defer faultReg.mu.Unlock()
	return faultReg.infos[p].Name
}

// Faults is a fault-injection plan: which points fail, and on which hit.
// A nil *Faults injects nothing.
type Faults struct {
	rules map[FaultPoint]uint64 // 0: every hit fails; n: only the n-th hit
	hits  map[FaultPoint]uint64
}

// ParseFaults parses a comma-separated plan: "POINT" fails every time the
// point is reached, "POINT@N" only the N-th time (1-based).
func ParseFaults(spec string) (*Faults, error) {
	f := &Faults{rules: map[FaultPoint]uint64{}, hits: map[FaultPoint]uint64{}}
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return f, nil
	}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		name, nth := part, uint64(0)
		if i := strings.IndexByte(part, '@'); i >= 0 {
			name = part[:i]
			n, err := strconv.ParseUint(part[i+1:], 10, 64)
			if err != nil || n == 0 {
				return nil, fmt.Errorf("fault %q: the hit after @ must be a positive integer", part)
			}
			nth = n
		}
		faultReg.mu.Lock()
		p, ok := faultReg.idx[name]
		faultReg.mu.Unlock()
		if !ok {
			var known []string
			for _, fi := range FaultPoints() {
				known = append(known, fi.Name)
			}
			return nil, fmt.Errorf("unknown fault point %q (known: %s)", name, strings.Join(known, ", "))
		}
		f.rules[p] = nth
	}
	return f, nil
}

// Set makes point p fail (every hit when nth is 0, else only the nth hit).
func (f *Faults) Set(p FaultPoint, nth uint64) {
	if f.rules == nil {
		f.rules, f.hits = map[FaultPoint]uint64{}, map[FaultPoint]uint64{}
	}
	f.rules[p] = nth
}

// Fail records a hit of p and reports whether the model must fail there.
func (f *Faults) Fail(p FaultPoint) bool {
	if f == nil || len(f.rules) == 0 {
		return false
	}
	nth, ok := f.rules[p]
	if !ok {
		return false
	}
	f.hits[p]++
	return nth == 0 || f.hits[p] == nth
}

// String renders the plan in ParseFaults syntax.
func (f *Faults) String() string {
	if f == nil {
		return ""
	}
	var parts []string
	for p, n := range f.rules {
		s := p.Name()
		if n != 0 {
			s += "@" + strconv.FormatUint(n, 10)
		}
		parts = append(parts, s)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
