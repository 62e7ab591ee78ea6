package alternative

// The named CPUs.
//
// Each bit is listed with why it is set: CPUID (as identify_cpu reads it),
// the vendor init code (intel.c / amd.c), or the mitigation
// cpu_select_mitigations (arch/x86/kernel/cpu/bugs.c, 6.1.192) picks on
// the default command line, with current microcode, on bare metal. The
// CPUID bits listed are those some 6.1 alternative, retpoline or return
// decision reads (every feature of the Debian 6.1 vmlinux .altinstructions
// census, see the package notes) plus the ones a mitigation decision
// depends on; bits no site reads are left out. A bit marked "(assumed)"
// depends on microcode or a model detail this package could not check
// against a machine.
//
// Bits deliberately absent on both: XENPV and HYPERVISOR (bare metal:
// every ALT_NOT(XENPV) paravirt alternative is taken), PVUNLOCK and
// VCPUPREEMPT (paravirt_set_cap sets them only for non-native spinlock
// ops), PTI (not Meltdown-affected: RDCL_NO / AMD whitelist), RETPOLINE
// and RETPOLINE_LFENCE (eIBRS / AutoIBRS is chosen), KERNEL_IBRS,
// USE_IBRS_FW (not set in an IBRS mode), USE_IBPB_FW and ENTRY_IBPB (no
// retbleed), INDIRECT_THUNK_ITS (not ITS-affected), RSB_CTXSW (eIBRS
// modes do not set it), SPEC_STORE_BYPASS_DISABLE (ssb=prctl),
// HYBRID_CPU, X86_BUG_11AP, X86_BUG_NULL_SEG (Zen 3+ enumerate
// null-selector-clears-base; Intel clears the base), X86_BUG_MONITOR.

func sapphireRapids() *CPU {
	return newCPU("sapphire-rapids",
		"Intel Xeon 4th gen, Sapphire Rapids, family 6 model 0x8f, bare metal, default command line",
		"__x86_return_thunk",
		[]string{
			"spectre_v1: usercopy/swapgs barriers (FENCE_SWAPGS_USER and _KERNEL: FSGSBASE, X86_BUG_SWAPGS)",
			"spectre_v2: Enhanced IBRS (ARCH_CAP_IBRS_ALL): apply_retpolines writes call/jmp *%reg; BHI: BHI_DIS_S (CLEAR_BHB_HW)",
			"retbleed, srso, its, tsa: not affected: RETHUNK clear, apply_returns writes ret; int3",
			"mds, taa, mmio, rfds, srbds, gds: not affected (MDS_NO, TAA_NO, FBSDP/PSDP/SBDR_SSDP_NO): no CLEAR_CPU_BUF",
			"vmscape: IBPB before exit to user space (IBPB_EXIT_TO_USER)",
		},
		intelBits)
}

func milan() *CPU {
	return newCPU("milan",
		"AMD EPYC 7003, Milan, Zen 3, family 0x19 model 0x01, bare metal, default command line",
		"srso_alias_return_thunk",
		[]string{
			"spectre_v1: swapgs barriers in kernel entry (FENCE_SWAPGS_KERNEL; AMD is NO_SWAPGS)",
			"spectre_v2: Retpolines (no AutoIBRS, not an IBRS part): apply_retpolines keeps the thunk calls; RSB filling on context switch and VM exit; IBRS around firmware calls",
			"srso: Safe RET: RETHUNK + UNRET + SRSO_ALIAS (family 0x19), apply_returns writes jmp srso_alias_return_thunk",
			"tsa: full (CLEAR_CPU_BUF, CLEAR_CPU_BUF_VM), with VERW_CLEAR microcode (assumed)",
			"vmscape: IBPB before exit to user space (IBPB_EXIT_TO_USER)",
		},
		milanBits)
}

func genoa() *CPU {
	return newCPU("genoa",
		"AMD EPYC 9004, Genoa, Zen 4, family 0x19 model 0x11, bare metal, default command line",
		"srso_alias_return_thunk",
		[]string{
			"spectre_v1: swapgs barriers in kernel entry (FENCE_SWAPGS_KERNEL; AMD is NO_SWAPGS)",
			"spectre_v2: AutoIBRS, used as eIBRS: apply_retpolines writes call/jmp *%reg; BHI: not affected (NO_BHI)",
			"srso: Safe RET (the default srso_cmd): RETHUNK + UNRET, family 0x19 takes SRSO_ALIAS and srso_alias_return_thunk: apply_returns writes jmp srso_alias_return_thunk",
			"tsa: full (CLEAR_CPU_BUF, CLEAR_CPU_BUF_VM), with VERW_CLEAR microcode (assumed)",
			"vmscape: IBPB before exit to user space (IBPB_EXIT_TO_USER)",
		},
		amdBits)
}

// Bits common to both servers' CPUID and generic init.
var serverBits = []FeatureReason{
	{"X86_FEATURE_ALWAYS", "forced by early_identify_cpu on every CPU (static_cpu_has' ALTERNATIVE_TERNARY entries)"},
	{"X86_FEATURE_NX", "CPUID 0x80000001.EDX[20]"},
	{"X86_FEATURE_XMM2", "CPUID 1.EDX[26] (SSE2)"},
	{"X86_FEATURE_XMM4_1", "CPUID 1.ECX[19] (SSE4.1)"},
	{"X86_FEATURE_CX16", "CPUID 1.ECX[13]"},
	{"X86_FEATURE_POPCNT", "CPUID 1.ECX[23]"},
	{"X86_FEATURE_XSAVE", "CPUID 1.ECX[26]"},
	{"X86_FEATURE_OSXSAVE", "CR4.OSXSAVE set by fpu__init_cpu_xstate"},
	{"X86_FEATURE_RDRAND", "CPUID 1.ECX[30]"},
	{"X86_FEATURE_PCID", "CPUID 1.ECX[17]"},
	{"X86_FEATURE_CLFLUSH", "CPUID 1.EDX[19]"},
	{"X86_FEATURE_MWAIT", "CPUID 1.ECX[3]"},
	{"X86_FEATURE_FSGSBASE", "CPUID 7.EBX[0]"},
	{"X86_FEATURE_ERMS", "CPUID 7.EBX[9] (fast strings enabled in IA32_MISC_ENABLE on Intel)"},
	{"X86_FEATURE_INVPCID", "CPUID 7.EBX[10]"},
	{"X86_FEATURE_RDSEED", "CPUID 7.EBX[18]"},
	{"X86_FEATURE_SMAP", "CPUID 7.EBX[20], CONFIG_X86_SMAP: stac/clac alternatives"},
	{"X86_FEATURE_CLFLUSHOPT", "CPUID 7.EBX[23]"},
	{"X86_FEATURE_CLWB", "CPUID 7.EBX[24]"},
	{"X86_FEATURE_UMIP", "CPUID 7.ECX[2], CONFIG_X86_UMIP"},
	{"X86_FEATURE_PKU", "CPUID 7.ECX[3], CONFIG_X86_INTEL_MEMORY_PROTECTION_KEYS"},
	{"X86_FEATURE_OSPKE", "CR4.PKE set by setup_pku"},
	{"X86_FEATURE_FSRM", "CPUID 7.EDX[4]: fast short rep mov (Ice Lake / Zen 3 and later)"},
	{"X86_FEATURE_XSAVEOPT", "CPUID 0xd.1.EAX[0]"},
	{"X86_FEATURE_XSAVEC", "CPUID 0xd.1.EAX[1]"},
	{"X86_FEATURE_XSAVES", "CPUID 0xd.1.EAX[3]"},
	{"X86_FEATURE_XCOMPACTED", "fpu__init_system_xstate: XSAVEC or XSAVES"},
	{"X86_FEATURE_RDTSCP", "CPUID 0x80000001.EDX[27]"},
	{"X86_FEATURE_GBPAGES", "CPUID 0x80000001.EDX[26]"},
	{"X86_FEATURE_3DNOWPREFETCH", "CPUID 0x80000001.ECX[8] (PREFETCHW)"},
	{"X86_FEATURE_APERFMPERF", "CPUID 6.ECX[0]"},
	{"X86_FEATURE_REP_GOOD", "intel.c: family 6 (x86-64); amd.c: family >= 0x10"},
	{"X86_FEATURE_LFENCE_RDTSC", "intel.c / amd.c: SSE2 parts (a serializing LFENCE), rdtsc_ordered's first alternative"},
	{"X86_FEATURE_IBPB", "CPUID 7.EDX[26] (Intel) / 0x80000008.EBX[12] (AMD)"},
	{"X86_FEATURE_IBRS", "CPUID 7.EDX[26] (Intel) / 0x80000008.EBX[14] (AMD)"},
	{"X86_FEATURE_STIBP", "CPUID 7.EDX[27] / 0x80000008.EBX[15]"},
	{"X86_FEATURE_MSR_SPEC_CTRL", "init_speculation_control: the CPU has MSR_IA32_SPEC_CTRL"},
	{"X86_FEATURE_SSBD", "init_speculation_control"},
	{"X86_FEATURE_USE_IBPB", "spectre_v2_user_select_mitigation: IBPB present"},
	{"X86_FEATURE_FENCE_SWAPGS_KERNEL", "spectre_v1_select_mitigation: FSGSBASE is enabled"},
	{"X86_FEATURE_IBPB_EXIT_TO_USER", "vmscape_select_mitigation: X86_BUG_VMSCAPE, IBPB, AUTO"},
	{"X86_BUG_SPECTRE_V1", "cpu_set_bug_bits: every speculating CPU"},
	{"X86_BUG_SPECTRE_V2", "cpu_set_bug_bits: not NO_SPECTRE_V2"},
	{"X86_BUG_SPEC_STORE_BYPASS", "cpu_set_bug_bits: no SSB_NO"},
	{"X86_BUG_VMSCAPE", "cpu_vuln_blacklist: SAPPHIRERAPIDS_X / AMD family 0x19, bare metal"},
}

// Bits of the two recent parts (Sapphire Rapids, Genoa) that Milan lacks.
var recentBits = []FeatureReason{
	{"X86_FEATURE_AVX512F", "CPUID 7.EBX[16]"},
	{"X86_FEATURE_LA57", "CPUID 7.ECX[16] with CONFIG_X86_5LEVEL=y (Debian): the decompressor enables 5-level paging, cpu_feature_enabled(LA57) sites take the 5-level forms"},
	{"X86_FEATURE_IBRS_ENHANCED", "cpu_set_bug_bits: ARCH_CAP_IBRS_ALL (Intel) or AUTOIBRS (AMD)"},
}

func join(lists ...[]FeatureReason) []FeatureReason {
	var out []FeatureReason
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

var intelBits = join(serverBits, recentBits, []FeatureReason{
	{"X86_FEATURE_SELFSNOOP", "CPUID 1.EDX[27]"},
	{"X86_FEATURE_VMX", "CPUID 1.ECX[5]"},
	{"X86_FEATURE_TSC_ADJUST", "CPUID 7.EBX[1]"},
	{"X86_FEATURE_SGX", "CPUID 7.EBX[2], CONFIG_X86_SGX"},
	{"X86_FEATURE_SGX_LC", "CPUID 7.ECX[30]"},
	{"X86_FEATURE_SGX2", "CPUID 0x12.EAX[1]"},
	{"X86_FEATURE_WAITPKG", "CPUID 7.ECX[5]"},
	{"X86_FEATURE_ENQCMD", "CPUID 7.ECX[29], CONFIG_INTEL_IOMMU_SVM"},
	{"X86_FEATURE_SERIALIZE", "CPUID 7.EDX[14]: sync_core uses serialize"},
	{"X86_FEATURE_ARCH_LBR", "CPUID 7.EDX[19]"},
	{"X86_FEATURE_IBT", "CPUID 7.EDX[20]: the CPU has CET-IBT (the kernel is built without X86_KERNEL_IBT, the bit stays)"},
	{"X86_FEATURE_AMX_TILE", "CPUID 7.EDX[24]"},
	{"X86_FEATURE_SPEC_CTRL_SSBD", "CPUID 7.EDX[31]"},
	{"X86_FEATURE_ARCH_CAPABILITIES", "CPUID 7.EDX[29]"},
	{"X86_FEATURE_BHI_CTRL", "CPUID 7.2.EDX[4]"},
	{"X86_FEATURE_XFD", "CPUID 0xd.1.EAX[4] (AMX)"},
	{"X86_FEATURE_HWP", "CPUID 6.EAX[7]"},
	{"X86_FEATURE_ARCH_PERFMON", "intel.c: CPUID 0xa architectural perfmon"},
	{"X86_FEATURE_MOVDIR64B", "CPUID 7.ECX[28]"},
	{"X86_FEATURE_FLUSH_L1D", "CPUID 7.EDX[28]"},
	{"X86_FEATURE_RSB_VMEXIT_LITE", "spectre_v2_select_rsb_mitigation: eIBRS with X86_BUG_EIBRS_PBRSB (assumed, as that bug; read by kvm-intel's VM exit)"},
	{"X86_FEATURE_IDA", "CPUID 6.EAX[1]"},
	{"X86_FEATURE_SYSENTER32", "intel.c: set on x86-64"},
	{"X86_FEATURE_APIC_MSRS_FENCE", "identify_cpu default, kept on Intel (AMD clears it): weak_wrmsr_fence's ALT_NOT entries stay"},
	{"X86_FEATURE_FENCE_SWAPGS_USER", "spectre_v1_select_mitigation: X86_BUG_SWAPGS without PTI"},
	{"X86_FEATURE_CLEAR_BHB_HW", "bhi_select_mitigation: BHI_CTRL present, BHI_DIS_S set"},
	{"X86_BUG_SWAPGS", "cpu_set_bug_bits: Sapphire Rapids is not NO_SWAPGS"},
	{"X86_BUG_BHI", "cpu_set_bug_bits: eIBRS and not NO_BHI"},
	{"X86_BUG_EIBRS_PBRSB", "cpu_set_bug_bits: eIBRS without ARCH_CAP_PBRSB_NO (assumed; only kvm's VM-exit path reads it)"},
})

var amdBits = join(serverBits, recentBits, amdCommonBits, []FeatureReason{
	{"X86_FEATURE_ZEN4", "amd.c: family 0x19 models 0x10-0x1f"},
	{"X86_FEATURE_AUTOIBRS", "CPUID 0x80000021.EAX[8]"},
	{"X86_FEATURE_AMD_LBR_V2", "CPUID 0x80000022.EAX[1]"},
	{"X86_FEATURE_AMD_LBR_PMC_FREEZE", "CPUID 0x80000022.EAX[2]"},
})

// Milan: no AutoIBRS, so spectre_v2=auto picks retpolines.
var milanBits = join(serverBits, amdCommonBits, []FeatureReason{
	{"X86_FEATURE_ZEN3", "amd.c: family 0x19 models 0x00-0x0f"},
	{"X86_FEATURE_RETPOLINE", "spectre_v2_select_mitigation: AUTO without IBRS_ENHANCED on AMD gives spectre_v2_select_retpoline: SPECTRE_V2_RETPOLINE"},
	{"X86_FEATURE_RSB_CTXSW", "spectre_v2_select_rsb_mitigation: SPECTRE_V2_RETPOLINE"},
	{"X86_FEATURE_RSB_VMEXIT", "spectre_v2_select_rsb_mitigation: SPECTRE_V2_RETPOLINE"},
	{"X86_FEATURE_USE_IBRS_FW", "spectre_v2_select_mitigation: IBRS present, not an IBRS mode, no X86_BUG_RETBLEED"},
})

// Bits shared by Zen 3 and Zen 4 (family 0x19) servers.
var amdCommonBits = []FeatureReason{
	{"X86_FEATURE_SVM", "CPUID 0x80000001.ECX[2]"},
	{"X86_FEATURE_NRIPS", "CPUID 0x8000000a.EDX[3] (kvm-amd)"},
	{"X86_FEATURE_TSCRATEMSR", "CPUID 0x8000000a.EDX[4] (kvm-amd)"},
	{"X86_FEATURE_FLUSHBYASID", "CPUID 0x8000000a.EDX[6] (kvm-amd)"},
	{"X86_FEATURE_DECODEASSISTS", "CPUID 0x8000000a.EDX[7] (kvm-amd)"},
	{"X86_FEATURE_V_SPEC_CTRL", "CPUID 0x8000000a.EDX[20] (kvm-amd)"},
	{"X86_FEATURE_SYSCALL32", "amd.c: early_init_amd on x86-64"},
	{"X86_FEATURE_VMMCALL", "amd.c: init_amd"},
	{"X86_FEATURE_SMCA", "CPUID 0x80000007.EBX[3]: scalable MCA"},
	{"X86_FEATURE_ZEN", "amd.c: init_amd_zn (families 0x17, 0x19)"},
	{"X86_FEATURE_AMD_IBPB", "CPUID 0x80000008.EBX[12]"},
	{"X86_FEATURE_AMD_IBRS", "CPUID 0x80000008.EBX[14]"},
	{"X86_FEATURE_AMD_SSBD", "CPUID 0x80000008.EBX[24]"},
	{"X86_FEATURE_AMD_IBPB_RET", "CPUID 0x80000008.EBX[30] (assumed on Zen 4: no X86_BUG_IBPB_NO_RET)"},
	{"X86_FEATURE_SME_COHERENT", "CPUID 0x8000001f.EAX[10]"},
	{"X86_FEATURE_IBPB_BRTYPE", "srso_select_mitigation: IBPB-extending microcode (SBPB probe succeeds; assumed current microcode)"},
	{"X86_FEATURE_SBPB", "cpu_has_ibpb_brtype_microcode on family 0x19 (assumed current microcode)"},
	{"X86_FEATURE_RETHUNK", "srso_select_mitigation, Safe RET"},
	{"X86_FEATURE_UNRET", "srso_select_mitigation, Safe RET"},
	{"X86_FEATURE_SRSO_ALIAS", "srso_select_mitigation, Safe RET on family 0x19 (set_return_thunk(srso_alias_return_thunk))"},
	{"X86_FEATURE_VERW_CLEAR", "CPUID 0x80000021.EAX[5] with TSA microcode (assumed)"},
	{"X86_FEATURE_CLEAR_CPU_BUF", "tsa_select_mitigation: TSA_MITIGATION_FULL"},
	{"X86_FEATURE_CLEAR_CPU_BUF_VM", "tsa_select_mitigation: TSA_MITIGATION_FULL"},
	{"X86_BUG_SYSRET_SS_ATTRS", "amd.c: init_amd"},
	{"X86_BUG_SRSO", "cpu_vuln_blacklist: AMD family 0x19, no SRSO_NO"},
	{"X86_BUG_TSA", "cpu_vuln_blacklist: AMD family 0x19, no TSA_SQ_NO / TSA_L1_NO"},
}
