package alternative

// The named CPUs. Each bit is listed with the reason it is set; the
// feature words come from CPUID as identify_cpu reads them, the synthetic
// bits (word 3, 7, 8, 11, ...) from the vendor init code and
// cpu_select_mitigations of 6.1.192 with the default command line. Only
// bits that decide a site of the Debian 6.1 .altinstructions, or the
// retpoline/return patching, change the text; the others are listed so the
// set reads as the CPU's.

func sapphireRapids() *CPU {
	return newCPU("sapphire-rapids",
		"Intel Xeon 4th gen (Sapphire Rapids, family 6 model 0x8f), bare metal, default command line",
		"__x86_return_thunk",
		[]string{
			"spectre_v2: Enhanced / Automatic IBRS (eIBRS): no retpolines, indirect calls patched to call *%reg",
			"retbleed, srso, its: not affected: no return thunk, returns patched to ret; int3",
		},
		intelBits)
}

func genoa() *CPU {
	return newCPU("genoa",
		"AMD EPYC 9004 (Genoa, Zen 4, family 0x19), bare metal, default command line",
		"srso_return_thunk",
		[]string{
			"spectre_v2: AutoIBRS (eIBRS mode): no retpolines, indirect calls patched to call *%reg",
			"srso: Safe RET: X86_FEATURE_SRSO, RETHUNK with srso_return_thunk",
		},
		amdBits)
}

var intelBits = []FeatureReason{
	{"X86_FEATURE_SMAP", "CPUID 7.EBX[20]"},
}

var amdBits = []FeatureReason{
	{"X86_FEATURE_SMAP", "CPUID 7.EBX[20]"},
}
