package alternative

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Word counts of boot_cpu_data.x86_capability
// (arch/x86/include/asm/cpufeatures.h, 6.1).
const (
	NCAPINTS = 22 // 32-bit words of feature bits
	NBUGINTS = 2  // 32-bit words of bug bits, after the feature words
)

// Feature is an X86_FEATURE_* or X86_BUG_* bit number: word*32+bit, bugs
// from NCAPINTS*32 on (X86_BUG(x)). It is the u16 cpuid field of struct
// alt_instr without ALTINSTR_FLAG_INV.
type Feature uint16

// ALTINSTR_FLAG_INV: bit 15 of alt_instr.cpuid, "patch if the feature is
// absent" (ALT_NOT).
const FlagInv = 1 << 15

// Features the patch functions test themselves (cpufeatures.h values;
// TestFeatureConstants checks them against the generated table).
const (
	X86_FEATURE_NX                 Feature = 1*32 + 20
	X86_FEATURE_ALWAYS             Feature = 3*32 + 21
	X86_FEATURE_HYPERVISOR         Feature = 4*32 + 31
	X86_FEATURE_XENPV              Feature = 8*32 + 16
	X86_FEATURE_PVUNLOCK           Feature = 8*32 + 20
	X86_FEATURE_VCPUPREEMPT        Feature = 8*32 + 21
	X86_FEATURE_RETPOLINE          Feature = 11*32 + 12
	X86_FEATURE_RETPOLINE_LFENCE   Feature = 11*32 + 13
	X86_FEATURE_RETHUNK            Feature = 11*32 + 14
	X86_FEATURE_INDIRECT_THUNK_ITS Feature = 21*32 + 5

	featureLimit Feature = (NCAPINTS + NBUGINTS) * 32
)

// FeatureByName returns the bit of an X86_FEATURE_* / X86_BUG_* name of
// cpufeatures.h; the X86_FEATURE_ prefix may be left off ("XENPV").
func FeatureByName(name string) (Feature, bool) {
	if f, ok := featureNames[name]; ok {
		return f, true
	}
	f, ok := featureNames["X86_FEATURE_"+name]
	return f, ok
}

// String returns the feature's cpufeatures.h name (the first, when two
// names share a bit), or word*32+bit.
func (f Feature) String() string {
	if n := featureName(f); n != "" {
		return n
	}
	if f >= NCAPINTS*32 {
		return fmt.Sprintf("X86_BUG(%d)", f-NCAPINTS*32)
	}
	return fmt.Sprintf("(%d*32+%d)", f/32, f%32)
}

// byBit names each feature bit once (the first of its names in order),
// built on first use; safe for concurrent runs.
var byBit = sync.OnceValue(func() map[Feature]string {
	m := make(map[Feature]string, len(featureNames))
	names := make([]string, 0, len(featureNames))
	for n := range featureNames {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := m[featureNames[n]]; !ok {
			m[featureNames[n]] = n
		}
	}
	return m
})

func featureName(f Feature) string { return byBit()[f] }

// FeatureSet is boot_cpu_data.x86_capability: NCAPINTS words of feature
// bits then NBUGINTS words of bug bits, as boot_cpu_has() reads them.
type FeatureSet [NCAPINTS + NBUGINTS]uint32

// Has is boot_cpu_has(f). Bits past the array are never set.
func (s *FeatureSet) Has(f Feature) bool {
	if f >= featureLimit {
		return false
	}
	return s[f/32]&(1<<(f%32)) != 0
}

// Set is setup_force_cpu_cap / set_cpu_cap.
func (s *FeatureSet) Set(f Feature) {
	if f < featureLimit {
		s[f/32] |= 1 << (f % 32)
	}
}

// Clear is setup_clear_cpu_cap.
func (s *FeatureSet) Clear(f Feature) {
	if f < featureLimit {
		s[f/32] &^= 1 << (f % 32)
	}
}

// List returns the set bits in bit order.
func (s *FeatureSet) List() []Feature {
	var out []Feature
	for f := Feature(0); f < featureLimit; f++ {
		if s.Has(f) {
			out = append(out, f)
		}
	}
	return out
}

// String lists the set bits by name, comma separated.
func (s *FeatureSet) String() string {
	var b strings.Builder
	for i, f := range s.List() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.String())
	}
	return b.String()
}
