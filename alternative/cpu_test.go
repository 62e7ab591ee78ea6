package alternative

import (
	"fmt"
	"strings"
	"testing"
)

// TestFeatureConstants: the hand-written constants equal cpufeatures.h's
// values (through the generated table).
func TestFeatureConstants(t *testing.T) {
	for name, f := range map[string]Feature{
		"X86_FEATURE_NX": X86_FEATURE_NX, "X86_FEATURE_ALWAYS": X86_FEATURE_ALWAYS,
		"X86_FEATURE_HYPERVISOR": X86_FEATURE_HYPERVISOR, "X86_FEATURE_XENPV": X86_FEATURE_XENPV,
		"X86_FEATURE_PVUNLOCK": X86_FEATURE_PVUNLOCK, "X86_FEATURE_VCPUPREEMPT": X86_FEATURE_VCPUPREEMPT,
		"X86_FEATURE_RETPOLINE": X86_FEATURE_RETPOLINE, "X86_FEATURE_RETPOLINE_LFENCE": X86_FEATURE_RETPOLINE_LFENCE,
		"X86_FEATURE_RETHUNK": X86_FEATURE_RETHUNK, "X86_FEATURE_INDIRECT_THUNK_ITS": X86_FEATURE_INDIRECT_THUNK_ITS,
	} {
		if g, ok := featureNames[name]; !ok || g != f {
			t.Errorf("%s = %d, cpufeatures.h says %d (%v)", name, f, g, ok)
		}
	}
	if f, _ := FeatureByName("X86_BUG_SRSO"); f != NCAPINTS*32+32 {
		t.Errorf("X86_BUG_SRSO = %d, want X86_BUG(1*32+0) = %d", f, NCAPINTS*32+32)
	}
	if f, ok := FeatureByName("XENPV"); !ok || f != X86_FEATURE_XENPV {
		t.Error("short names are not resolved")
	}
	if s := X86_FEATURE_XENPV.String(); s != "X86_FEATURE_XENPV" {
		t.Errorf("String() = %s", s)
	}
}

// TestCPUs: every named CPU builds, documents each bit once, and has the
// decisions its mitigation list claims.
func TestCPUs(t *testing.T) {
	for _, name := range CPUNames() {
		c, err := LookupCPU(name)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, r := range c.Why {
			if seen[r.Name] {
				t.Errorf("%s: %s listed twice", name, r.Name)
			}
			seen[r.Name] = true
			if r.Why == "" {
				t.Errorf("%s: %s has no reason", name, r.Name)
			}
		}
		if len(c.Features.List()) != len(c.Why) {
			t.Errorf("%s: %d bits set, %d documented", name, len(c.Features.List()), len(c.Why))
		}
		for _, must := range []Feature{X86_FEATURE_ALWAYS, X86_FEATURE_NX} {
			if !c.Has(must) {
				t.Errorf("%s lacks %v", name, must)
			}
		}
		for _, never := range []Feature{X86_FEATURE_XENPV, X86_FEATURE_HYPERVISOR, X86_FEATURE_PVUNLOCK, X86_FEATURE_VCPUPREEMPT, X86_FEATURE_RETPOLINE_LFENCE} {
			if c.Has(never) {
				t.Errorf("%s (bare metal) has %v", name, never)
			}
		}
		// spectre_v2=auto: eIBRS when the CPU has it, else retpolines.
		eibrs, _ := FeatureByName("X86_FEATURE_IBRS_ENHANCED")
		if c.Has(eibrs) == c.Has(X86_FEATURE_RETPOLINE) {
			t.Errorf("%s: IBRS_ENHANCED %v and RETPOLINE %v", name, c.Has(eibrs), c.Has(X86_FEATURE_RETPOLINE))
		}
	}
	spr, _ := LookupCPU("sapphire-rapids")
	if spr.WantsRethunk() || spr.SpectreV2Mode() != "indirect" {
		t.Errorf("sapphire-rapids: rethunk %v, spectre_v2 %s", spr.WantsRethunk(), spr.SpectreV2Mode())
	}
	genoa, _ := LookupCPU("genoa")
	srso, _ := FeatureByName("X86_FEATURE_SRSO_ALIAS")
	if !genoa.WantsRethunk() || genoa.ReturnThunk != "srso_alias_return_thunk" || !genoa.Has(srso) {
		t.Errorf("genoa: rethunk %v via %s", genoa.WantsRethunk(), genoa.ReturnThunk)
	}
	milan, _ := LookupCPU("milan")
	if milan.SpectreV2Mode() != "retpoline" || !milan.WantsRethunk() || milan.ReturnThunk != "srso_alias_return_thunk" {
		t.Errorf("milan: spectre_v2 %s, rethunk %v via %s", milan.SpectreV2Mode(), milan.WantsRethunk(), milan.ReturnThunk)
	}
	if _, err := LookupCPU("pentium"); err == nil || !strings.Contains(err.Error(), "genoa") {
		t.Errorf("unknown CPU error: %v", err)
	}
	if DefaultCPU != "sapphire-rapids" {
		t.Errorf("DefaultCPU %s: the docs and notes say sapphire-rapids", DefaultCPU)
	}
}

func ExampleLookupCPU() {
	c, _ := LookupCPU("genoa")
	fmt.Println(c.SpectreV2Mode(), c.WantsRethunk(), c.ReturnThunk)
	// Output: indirect true srso_alias_return_thunk
}
