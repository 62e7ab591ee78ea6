package module

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/kpsim/kpsim/image"
)

// compress returns b in the named format ("xz": LZMA2 with a 1 MiB
// dictionary and CRC32, as scripts/Makefile.modinst's xz; "zstd"; "gzip").
func compress(t testing.TB, format string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch format {
	case "xz":
		w, err := xz.WriterConfig{DictCap: 1 << 20, CheckSum: xz.CRC32}.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case "zstd":
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
		w.Close()
	case "gzip":
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
	}
	return buf.Bytes()
}

func TestDecompress(t *testing.T) {
	ko := readTestdata(t, "dummy.ko")
	xzb, zst, gz := compress(t, "xz", ko), compress(t, "zstd", ko), compress(t, "gzip", ko)
	for _, tc := range []struct {
		name  string
		in    []byte
		limit int64
		want  string // error substring; "" for success
	}{
		{"dummy.ko", ko, MaxModuleSize, ""},
		{"dummy.ko.xz", xzb, MaxModuleSize, ""},
		{"dummy.ko.zst", zst, MaxModuleSize, ""},
		{"dummy.ko.gz", gz, MaxModuleSize, ""},
		{"dummy.ko", xzb, MaxModuleSize, ""}, // by magic, as kmod does
		{"dummy.ko.xz", ko, MaxModuleSize, "dummy.ko.xz: not xz data"},
		{"dummy.ko.gz", zst, MaxModuleSize, "dummy.ko.gz: not gzip data"},
		{"dummy.ko.xz", xzb[:len(xzb)-9], MaxModuleSize, "dummy.ko.xz: xz: "},
		{"dummy.ko.xz", append(slices.Clone(xzb), 1, 2, 3, 4), MaxModuleSize, "dummy.ko.xz: xz: "},
		{"dummy.ko.zst", zst[:len(zst)/2], MaxModuleSize, "dummy.ko.zst: zstd: "},
		{"dummy.ko.gz", gz[:len(gz)/2], MaxModuleSize, "dummy.ko.gz: gzip: "},
		{"dummy.ko.gz", append(slices.Clone(gz), gz...), MaxModuleSize, "bytes after the gzip member"},
		{"dummy.ko.xz", xzb, 4096, "larger than 0 MiB"},
		{"dummy.ko.zst", zst, 4096, "larger than 0 MiB"},
		{"dummy.ko.gz", gz, 4096, "larger than 0 MiB"},
	} {
		out, err := decompressLimit(tc.name, tc.in, tc.limit)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s (%d bytes): %v", tc.name, len(tc.in), err)
		case tc.want == "" && !bytes.Equal(out, ko):
			t.Errorf("%s: %d bytes out, not dummy.ko", tc.name, len(out))
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), tc.name+": ") || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: error %v, want one line naming the file and %q", tc.name, err, tc.want)
		}
	}
	// An xz block asking for a 1.5 GiB dictionary (LZMA2 property 37)
	// is refused before the decoder would allocate it.
	big := slices.Clone(xzb)
	h := big[12 : 12+(int(big[12])+1)*4]
	i := bytes.Index(h, []byte{0x21, 0x01})
	if i < 0 {
		t.Fatalf("no LZMA2 filter flags in the block header %x", h)
	}
	h[i+2] = 37
	binary.LittleEndian.PutUint32(h[len(h)-4:], crc32.ChecksumIEEE(h[:len(h)-4]))
	if _, err := Decompress("big.ko.xz", big); err == nil || !strings.Contains(err.Error(), "big.ko.xz: xz: block 0: a 1536 MiB dictionary") {
		t.Errorf("1.5 GiB dictionary: %v", err)
	}
}

// FuzzDecompress: any input decompresses to at most the limit or fails
// with one line naming the file; it never panics.
func FuzzDecompress(f *testing.F) {
	ko := readTestdata(f, "crc16.ko")
	for _, c := range []string{"xz", "zstd", "gzip"} {
		b := compress(f, c, ko)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add(ko[:64])
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := decompressLimit("fuzz.ko", b, 1<<20)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz.ko: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line naming fuzz.ko", msg)
			}
			return
		}
		if len(out) > 1<<20 {
			t.Fatalf("%d bytes out, past the limit", len(out))
		}
	})
}

// TestCompressedTree: a tree of .ko.xz, .ko.zst and .ko.gz files indexes
// and loads like one of .ko files; names drop every suffix.
func TestCompressedTree(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "kernel/lib"), 0o755)
	os.WriteFile(filepath.Join(dir, "kernel/lib/crc16.ko.zst"), compress(t, "zstd", readTestdata(t, "crc16.ko")), 0o644)
	os.WriteFile(filepath.Join(dir, "kernel/lib/dummy.ko.xz"), compress(t, "xz", readTestdata(t, "dummy.ko")), 0o644)
	os.WriteFile(filepath.Join(dir, "kernel/lib/test-static-keys.ko.gz"), compress(t, "gzip", readTestdata(t, "test_static_keys.ko")), 0o644)
	os.WriteFile(filepath.Join(dir, "kernel/lib/bad.ko.xz"), readTestdata(t, "crc16.ko"), 0o644)
	tr, err := OpenTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{"crc16": "crc16.ko.zst", "dummy": "dummy.ko.xz", "test_static_keys": "test-static-keys.ko.gz", "test-static-keys.ko.gz": "test-static-keys.ko.gz"} {
		if p, err := tr.Path(name); err != nil || filepath.Base(p) != file {
			t.Errorf("Path(%s) = %s, %v; want %s", name, p, err, file)
		}
	}
	if err := tr.Check([]string{"dummy", "crc16"}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Check([]string{"bad"}); err == nil || !strings.Contains(err.Error(), "bad.ko.xz: not xz data") {
		t.Errorf("bad.ko.xz: %v", err)
	}
	l := NewLoader(fakeKernel(t), Options{Dir: dir, Tree: tr})
	for _, n := range []string{"crc16", "dummy"} {
		if _, err := l.Load(n); err != nil {
			t.Fatal(err)
		}
	}
	if len(tr.unpacked) != 0 {
		t.Errorf("%d decompressed modules still kept after their loads", len(tr.unpacked))
	}
	if NormalizeName("kvm-intel.ko.xz") != "kvm_intel" || NormalizeName("xfs.ko.zst") != "xfs" || NormalizeName("a.ko.gz") != "a" {
		t.Error("NormalizeName keeps a compression suffix")
	}
}

func TestTreeDirs(t *testing.T) {
	for _, tc := range []struct {
		kernel, release string
		want            []string
	}{
		{"/c/6.12/boot/vmlinuz-6.12.117+deb13-amd64", "", []string{"/c/6.12/usr/lib/modules/6.12.117+deb13-amd64", "/c/6.12/lib/modules/6.12.117+deb13-amd64",
			"/c/6.12/boot/lib/modules/6.12.117+deb13-amd64", "/c/6.12/boot/usr/lib/modules/6.12.117+deb13-amd64"}},
		{"/c/7.3/usr/lib/modules/7.3-amd64/vmlinuz", "", []string{"/c/7.3/usr/lib/modules/7.3-amd64", "/c/7.3/lib/modules/7.3-amd64",
			"/c/7.3/usr/lib/modules/7.3-amd64/lib/modules/7.3-amd64", "/c/7.3/usr/lib/modules/7.3-amd64/usr/lib/modules/7.3-amd64"}[:2]},
		{"/c/kernels/vmlinuz-6.1.0-57-amd64", "", []string{"/c/kernels/lib/modules/6.1.0-57-amd64", "/c/kernels/usr/lib/modules/6.1.0-57-amd64"}},
		{"/c/6.12/usr/lib/debug/boot/vmlinux-6.12.117+deb13-amd64", "", []string{"/c/6.12/usr/lib/modules/6.12.117+deb13-amd64", "/c/6.12/lib/modules/6.12.117+deb13-amd64",
			"/c/6.12/boot/lib/modules/6.12.117+deb13-amd64", "/c/6.12/boot/usr/lib/modules/6.12.117+deb13-amd64",
			"/c/6.12/usr/lib/debug/boot/usr/lib/modules/6.12.117+deb13-amd64", "/c/6.12/usr/lib/debug/boot/lib/modules/6.12.117+deb13-amd64",
			"/c/6.12/usr/lib/debug/boot/lib/modules/6.12.117+deb13-amd64"}[:4]},
		{"/c/7.3/usr/lib/debug/lib/modules/7.3-amd64/vmlinux", "", []string{"/c/7.3/lib/modules/7.3-amd64", "/c/7.3/usr/lib/modules/7.3-amd64",
			"/c/7.3/usr/lib/debug/lib/modules/7.3-amd64"}},
		{"/x/bzImage", "", nil},
		{"/x/bzImage", "6.12.117+deb13-amd64", []string{"/x/lib/modules/6.12.117+deb13-amd64", "/x/usr/lib/modules/6.12.117+deb13-amd64"}},
		{"/x/boot/vmlinuz", "7.3-amd64", []string{"/x/usr/lib/modules/7.3-amd64", "/x/lib/modules/7.3-amd64", "/x/boot/lib/modules/7.3-amd64", "/x/boot/usr/lib/modules/7.3-amd64"}},
	} {
		got := TreeDirs(tc.kernel, tc.release)
		if len(tc.want) > 0 && len(got) > len(tc.want) {
			got = got[:len(tc.want)] // the order of the first ones matters
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("TreeDirs(%s, %q) =\n\t%q\nwant\n\t%q", tc.kernel, tc.release, got, tc.want)
		}
	}
	for k, want := range map[string]string{"/b/vmlinuz-6.1.0-57-amd64": "6.1.0-57-amd64", "/u/lib/modules/7.3-amd64/vmlinuz": "7.3-amd64",
		"/d/usr/lib/debug/lib/modules/7.3-amd64/vmlinux": "7.3-amd64", "/b/vmlinuz": "", "/b/bzImage": ""} {
		if got := ReleaseFromPath(k); got != want {
			t.Errorf("ReleaseFromPath(%s) = %q, want %q", k, got, want)
		}
	}
}

// TestVmalloc: first fit from the lowest address, guard pages, alignment,
// reservations; and the ROX cache carving PMD-sized pieces.
func TestVmalloc(t *testing.T) {
	const start, end uint64 = ModulesVaddr + PageSize, ModulesEnd
	var v vmapSpace
	a, _ := v.vmalloc(3*PageSize, PageSize, start, end)
	b, _ := v.vmalloc(1, PageSize, start, end)
	if a != start || b != start+4*PageSize {
		t.Errorf("blocks at %#x, %#x: want %#x and after its guard page %#x", a, b, start, start+4*PageSize)
	}
	var c execmemCache
	// The first text allocation populates a PMD-aligned 2 MiB piece above
	// the data blocks; data keeps filling the space below it.
	if _, ok := c.alloc(PageSize, start, end); ok {
		t.Fatal("an empty cache allocated")
	}
	x, _ := c.populateAlloc(&v, 5*PageSize, start, end)
	if x != ModulesVaddr+PMDSize {
		t.Errorf("first text at %#x, want the first PMD boundary %#x", x, uint64(ModulesVaddr+PMDSize))
	}
	y, _ := c.alloc(PageSize, start, end)
	if y != x+5*PageSize {
		t.Errorf("second text at %#x, want right after the first (no guard) %#x", y, x+5*PageSize)
	}
	d, _ := v.vmalloc(PageSize, PageSize, start, end)
	if d != b+2*PageSize {
		t.Errorf("data at %#x, want below the text piece at %#x", d, b+2*PageSize)
	}
	// Freed text is reused at once; a text request larger than what is
	// left populates a second piece past the first and its guard page.
	if !c.freeArea(x) {
		t.Fatal("freeArea: not from the cache")
	}
	if z, _ := c.alloc(2*PageSize, start, end); z != x {
		t.Errorf("reuse at %#x, want %#x", z, x)
	}
	w, _ := c.populateAlloc(&v, PMDSize, start, end)
	if w != ModulesVaddr+2*PMDSize+PMDSize {
		t.Errorf("second piece at %#x, want %#x (the next PMD boundary past the first piece's guard page)", w, uint64(ModulesVaddr+3*PMDSize))
	}
	// A piece wholly free again is dropped (execmem_cache_clean).
	c.freeArea(w)
	for _, f := range c.free {
		if f.start == w {
			t.Errorf("a free whole-PMD piece stays in the cache: %+v", f)
		}
	}
	var r vmapSpace
	r.reserve(start, start+10*PageSize)
	if a, _ := r.vmalloc(PageSize, PageSize, start, end); a != start+10*PageSize {
		t.Errorf("after a reservation: %#x", a)
	}
}

// genFakeKernel is fakeKernel of generation g.
func genFakeKernel(t testing.TB, g image.Generation) *image.Kernel {
	k := fakeKernel(t)
	k.Config.Gen = g
	return k
}

// TestLayoutGenerations loads the testdata modules under each
// generation's loader: 6.1 keeps core and init layouts; 6.12 and 7.3 lay
// them out in mod_mem_types (7.3 with .static_call_sites ro_after_init
// and text from the ROX cache), and every table decodes the same.
func TestLayoutGenerations(t *testing.T) {
	counts := map[image.Generation]Counts{}
	for _, g := range image.Generations {
		k := genFakeKernel(t, g)
		l := NewLoader(k, Options{})
		m := mustLoad(t, l, "dummy.ko")
		mustLoad(t, l, "crc16.ko")
		counts[g] = m.Counts
		sc, _ := m.Section(".static_call_sites")
		txt, _ := m.Section(".text")
		ini, _ := m.Section(".init.text")
		switch g {
		case image.Gen61:
			if m.Core.Size == 0 || m.Mem[ModText].Size != 0 || sc.Block != "core" || ini.Block != "init" {
				t.Errorf("6.1: core %+v, MOD_TEXT %+v, .static_call_sites in %s, .init.text in %s", m.Core, m.Mem[ModText], sc.Block, ini.Block)
			}
			if m.Size() != m.Core.Size {
				t.Errorf("6.1: size %d, core %d", m.Size(), m.Core.Size)
			}
		default:
			wantSC := "MOD_DATA"
			if g == image.Gen73 {
				wantSC = "MOD_RO_AFTER_INIT"
			}
			if m.Core.Size != 0 || sc.Block != wantSC || txt.Block != "MOD_TEXT" || ini.Block != "MOD_INIT_TEXT" {
				t.Errorf("%s: core %+v, .static_call_sites in %s (want %s), .text in %s, .init.text in %s", g, m.Core, sc.Block, wantSC, txt.Block, ini.Block)
			}
			if txt.Addr != m.Mem[ModText].Base || m.Module.Text.Start != txt.Addr {
				t.Errorf("%s: .text at %#x, MOD_TEXT %+v, text region %#x", g, txt.Addr, m.Mem[ModText], m.Module.Text.Start)
			}
			var sum uint64
			for _, ty := range []ModMemType{ModText, ModData, ModRodata, ModROAfterInit} {
				sum += m.Mem[ty].Size
			}
			if m.Size() != sum || sum == 0 {
				t.Errorf("%s: size %d, core types %d", g, m.Size(), sum)
			}
			if s := m.Module.StaticCallSites[0]; !s.Init {
				t.Errorf("%s: the init static-call site is not marked init", g)
			}
		}
		if g == image.Gen73 && txt.Addr%PMDSize != 0 {
			t.Errorf("7.3: the first module's text at %#x, want a fresh PMD-aligned ROX piece", txt.Addr)
		}
		if err := k.Validate(); err != nil {
			t.Errorf("%s: %v", g, err)
		}
	}
	if counts[image.Gen61] != counts[image.Gen612] || counts[image.Gen61] != counts[image.Gen73] {
		t.Errorf("counts differ between generations: %+v", counts)
	}
}

// TestKsymtabGenerations: 7.3 reads __ksymtab only (__ksymtab_gpl is
// obsolete and ignored), earlier generations both.
func TestKsymtabGenerations(t *testing.T) {
	for g, want := range map[image.Generation][]string{image.Gen61: {"__ksymtab", "__ksymtab_gpl"}, image.Gen612: {"__ksymtab", "__ksymtab_gpl"}, image.Gen73: {"__ksymtab"}} {
		if got := loaderGenFor(g).ksymtabs; !slices.Equal(got, want) {
			t.Errorf("%s: export tables %q, want %q", g, got, want)
		}
	}
	if loaderGenFor(image.GenUnknown) != loaderGens[image.Gen61] {
		t.Error("an image without a generation does not load as 6.1")
	}
	for g, want := range map[image.Generation][2]int{image.Gen61: {8, 12}, image.Gen612: {8, 12}, image.Gen73: {12, 16}} {
		lg := loaderGenFor(g)
		if got := [2]int{lg.bugEntry(false).size, lg.bugEntry(true).size}; got != want {
			t.Errorf("%s: struct bug_entry %v bytes (short, verbose), want %v", g, got, want)
		}
	}
}

// FuzzLoadFileGen is FuzzLoadFile under each generation's loader: a load
// fails with one line naming the file and leaves the image unchanged, or
// every section lies in one of the module's blocks.
func FuzzLoadFileGen(f *testing.F) {
	for _, n := range []string{"dummy.ko", "crc16.ko"} {
		b := readTestdata(f, n)
		for g := range uint8(3) {
			f.Add(b, g)
			f.Add(compress(f, "xz", b), g)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, g uint8) {
		k := genFakeKernel(t, image.Generations[int(g)%len(image.Generations)])
		l := NewLoader(k, Options{})
		l.maxBlock = 4 << 20
		m, err := l.LoadFile("fuzz.ko", b)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz.ko: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line naming fuzz.ko", msg)
			}
			if len(k.Modules) != 0 {
				t.Fatal("failed load left a module in the image")
			}
			return
		}
		for _, s := range m.Sections {
			if s.Size == 0 {
				continue
			}
			blk := m.mem.block(s.Addr)
			if blk == nil || blk.Name != s.Block || s.Addr+s.Size > blk.Base+uint64(len(blk.Bytes)) {
				t.Fatalf("section %s [%#x, +%#x) outside its %s block", s.Name, s.Addr, s.Size, s.Block)
			}
		}
	})
}

// TestDecompressHintBounded: a tiny gzip file whose ISIZE trailer claims
// the whole limit does not make kpsim allocate it.
func TestDecompressHintBounded(t *testing.T) {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write([]byte("\x7fELF"))
	w.Close()
	b := z.Bytes()
	binary.LittleEndian.PutUint32(b[len(b)-4:], 255<<20) // ISIZE: 255 MiB
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	Decompress("tiny.ko.gz", b) // an error (ISIZE mismatch) or not: no 255 MiB buffer
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 16<<20 {
		t.Fatalf("decompressing %d bytes allocated %d MiB", len(b), d>>20)
	}
}
