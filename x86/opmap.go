package x86

// The opcode tables later generations' x86-opcode-map.txt added, reduced
// like layout.go's to what the length and validity need. 6.1 has none of
// them (its inat_avx_tables[4] and [7] are NULL, it has no XOP tables).

// evexMap4 is "Table: EVEX map 4" (6.12 and 7.3: APX legacy instructions
// promoted to EVEX). Every entry has a ModRM. pps has bit n set when the
// entry exists for EVEX.pp = n (0 none, 1 66, 2 F3, 3 F2:
// inat_get_avx_attribute takes the pp variant table of a non-group opcode
// and finds nothing where the map lists no form for that prefix); groups
// (1A) exist for every pp. scalable is (es) on the form EVEX.pp = 66 reads
// (the only pp for which INAT_EVEX_SCALABLE changes anything).
type map4Entry struct {
	pps      uint8
	imm      uint8
	scalable bool
}

const (
	pp0   = 1 << 0
	pp66  = 1 << 1
	ppF3  = 1 << 2
	ppF2  = 1 << 3
	ppAny = pp0 | pp66 | ppF3 | ppF2
)

var evexMap4 = func() (t [256]map4Entry) {
	// "00: ADD Eb,Gb (ev)": the byte forms and a few others, no prefix.
	for _, op := range []byte{0x00, 0x02, 0x08, 0x0a, 0x10, 0x12, 0x18, 0x1a, 0x20, 0x22,
		0x28, 0x2a, 0x30, 0x32, 0x38, 0x3a, 0x84, 0x8f, 0xf9} {
		t[op] = map4Entry{pps: pp0}
	}
	// "01: ADD Ev,Gv (es) | ADD Ev,Gv (66),(es)": no prefix and 66.
	for _, op := range []byte{0x01, 0x03, 0x09, 0x0b, 0x11, 0x13, 0x19, 0x1b, 0x21, 0x23,
		0x29, 0x2b, 0x31, 0x33, 0x39, 0x3b, 0x60, 0x61, 0x85, 0x88, 0xa5, 0xad, 0xaf, 0xf4, 0xf5} {
		t[op] = map4Entry{pps: pp0 | pp66, scalable: true}
	}
	t[0x24] = map4Entry{pps: pp0 | pp66, imm: immByte, scalable: true}    // SHLD Ev,Gv,Ib
	t[0x2c] = map4Entry{pps: pp0 | pp66, imm: immByte, scalable: true}    // SHRD Ev,Gv,Ib
	t[0x69] = map4Entry{pps: pp0 | pp66, imm: immVWord32, scalable: true} // IMUL Gv,Ev,Iz
	t[0x6b] = map4Entry{pps: pp0 | pp66, imm: immByte, scalable: true}    // IMUL Gv,Ev,Ib
	for op := 0x40; op <= 0x4f; op++ {
		// CMOVcc/CFCMOVcc (es), (66),(es); SETcc Eb (F2),(ev)
		t[op] = map4Entry{pps: pp0 | pp66 | ppF2, scalable: true}
	}
	t[0x65] = map4Entry{pps: pp66}              // WRUSSD/Q (66),(ev)
	t[0x66] = map4Entry{pps: pp0 | pp66 | ppF3} // WRSSD; ADCX, WRSSQ (66); ADOX (F3)
	t[0xf0] = map4Entry{pps: pp0 | ppF3}        // CRC32 Gy,Eb (es); INVEPT (F3),(ev)
	t[0xf1] = map4Entry{pps: pp0 | pp66 | ppF3, scalable: true}
	t[0xf2] = map4Entry{pps: ppF3}               // INVPCID (F3),(ev)
	t[0xf8] = map4Entry{pps: pp66 | ppF3 | ppF2} // MOVDIR64B (66), ENQCMDS/UWRMSR (F3), ENQCMD/URDMSR (F2)
	// Groups: any pp; Grp3 and Grp5 entries are applied in groupAttr.
	t[0x80] = map4Entry{pps: ppAny, imm: immByte}                    // Grp1 Eb,Ib (ev)
	t[0x81] = map4Entry{pps: ppAny, imm: immVWord32, scalable: true} // Grp1 Ev,Iz (es)
	t[0x83] = map4Entry{pps: ppAny, imm: immByte, scalable: true}    // Grp1 Ev,Ib (es)
	t[0xc0] = map4Entry{pps: ppAny, imm: immByte}                    // Grp2 Eb,Ib (ev)
	t[0xc1] = map4Entry{pps: ppAny, imm: immByte, scalable: true}    // Grp2 Ev,Ib (es)
	t[0xd0] = map4Entry{pps: ppAny}
	t[0xd1] = map4Entry{pps: ppAny, scalable: true}
	t[0xd2] = map4Entry{pps: ppAny}
	t[0xd3] = map4Entry{pps: ppAny, scalable: true}
	t[0xf6] = map4Entry{pps: ppAny}                 // Grp3_1 Eb (ev)
	t[0xf7] = map4Entry{pps: ppAny, scalable: true} // Grp3_2 Ev (es)
	t[0xfe] = map4Entry{pps: ppAny}                 // Grp4 (ev)
	t[0xff] = map4Entry{pps: ppAny, scalable: true} // Grp5 (es) | PUSH2 (ev)
	return
}()

// evexMap4Attr looks op up in EVEX map 4: its attribute, whether the map
// has it for EVEX.pp pp, and whether that form is (es), INAT_EVEX_SCALABLE.
// Every entry is (ev) or (es), EVEX only: a VEX3 with map 4 is -EINVAL.
func evexMap4Attr(op byte, evex bool, pp byte) (a attr, valid, scalable bool) {
	e := evexMap4[op]
	if !evex || e.pps&(1<<pp) == 0 {
		return attr{}, false, false
	}
	return attr{modrm: true, imm: e.imm}, true, e.scalable
}

// xopAttr looks op up in the XOP maps of the 7.3 map ("Table: XOP map 8h",
// "9h", "Ah"; inat_get_xop_attribute, no prefix variants). Every entry has
// a ModRM; the map 8h entries all carry an Ib (Ib, or the Lo/Lx register
// byte the awk sizes as INAT_IMM_BYTE); Ah 10 (BEXTR) an Id, Ah 12 /0-/1
// (GrpXOP4) an Id from the group. An opcode the map lacks, or a map outside
// 8h-Ah, is -EINVAL.
func xopAttr(vmap, op byte) (attr, bool) {
	switch vmap {
	case 0x8:
		switch op {
		case 0x85, 0x86, 0x87, 0x8e, 0x8f, 0x95, 0x96, 0x97, 0x9e, 0x9f, 0xa2, 0xa3, 0xa6, 0xb6,
			0xc0, 0xc1, 0xc2, 0xc3, 0xcc, 0xcd, 0xce, 0xcf, 0xec, 0xed, 0xee, 0xef:
			return attr{modrm: true, imm: immByte}, true
		}
	case 0x9:
		switch op {
		case 0x01, 0x02, 0x12, // GrpXOP1-3
			0x80, 0x81, 0x82, 0x83,
			0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0x9b,
			0xc1, 0xc2, 0xc3, 0xc6, 0xc7, 0xcb, 0xd1, 0xd2, 0xd3, 0xd6, 0xd7, 0xdb, 0xe1, 0xe2, 0xe3:
			return attr{modrm: true}, true
		}
	case 0xa:
		switch op {
		case 0x10:
			return attr{modrm: true, imm: immDword}, true
		case 0x12: // GrpXOP4
			return attr{modrm: true}, true
		}
	}
	return attr{}, false
}
