package kconfig

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       map[string]string
		err        string
	}{
		{"set and unset", "#\n# comment\nCONFIG_X86_KERNEL_IBT=y\n# CONFIG_CFI_CLANG is not set\nCONFIG_FUNCTION_ALIGNMENT=16\nCONFIG_LOCALVERSION=\"-x\"\n",
			map[string]string{"CONFIG_X86_KERNEL_IBT": "y", "CONFIG_CFI_CLANG": "n", "CONFIG_FUNCTION_ALIGNMENT": "16", "CONFIG_LOCALVERSION": "\"-x\""}, ""},
		{"garbage line", "CONFIG_A=y\nthis is not a config\n", nil, "f:2: not a kernel config line"},
		{"empty", "# nothing\n", nil, "no CONFIG_ options"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("f", []byte(tc.text))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if c.Opts[k] != v {
					t.Errorf("%s = %q, want %q", k, c.Opts[k], v)
				}
			}
			if v, ok := c.Bool("CONFIG_CFI_CLANG"); !ok || v {
				t.Errorf("CFI_CLANG: %v %v, want false true", v, ok)
			}
			if n, ok := c.Int("CONFIG_FUNCTION_ALIGNMENT"); !ok || n != 16 {
				t.Errorf("alignment %d %v", n, ok)
			}
		})
	}
}

func TestEmbedded(t *testing.T) {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write([]byte("CONFIG_X86_KERNEL_IBT=y\n"))
	w.Close()
	// The marker also sits in the code reading it; the copy after it is
	// the configuration.
	img := append([]byte("xxIKCFG_STnot gzipIKCFG_EDyy"), []byte("IKCFG_ST")...)
	img = append(append(img, z.Bytes()...), []byte("IKCFG_ED")...)
	c, ok, err := Embedded(img)
	if err != nil || !ok {
		t.Fatalf("ok %v err %v", ok, err)
	}
	if v, _ := c.Bool("CONFIG_X86_KERNEL_IBT"); !v {
		t.Fatal("IBT not read")
	}
	if _, ok, _ := Embedded([]byte("no config here")); ok {
		t.Fatal("found a config in an image without one")
	}
}

func TestBeside(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"boot/config-6.12.1", "usr/lib/modules/7.3-amd64/config"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte("CONFIG_A=y\n"), 0o644)
	}
	for _, tc := range []struct{ image, rel, want string }{
		{"boot/vmlinuz-6.12.1", "6.12.1", "boot/config-6.12.1"},
		{"usr/lib/debug/boot/vmlinux-6.12.1", "6.12.1", "boot/config-6.12.1"},
		{"usr/lib/modules/7.3-amd64/vmlinuz", "7.3-amd64", "usr/lib/modules/7.3-amd64/config"},
		{"usr/lib/debug/lib/modules/7.3-amd64/vmlinux", "7.3-amd64", "usr/lib/modules/7.3-amd64/config"},
		{"boot/vmlinuz-6.1", "6.1", ""},
		{"elsewhere/deep/vmlinuz-6.12.1", "6.12.1", ""}, // never above the image's tree
		{"boot/vmlinuz-6.12.1", "", ""},
	} {
		got := Beside(filepath.Join(dir, tc.image), tc.rel)
		want := ""
		if tc.want != "" {
			want = filepath.Join(dir, tc.want)
		}
		if got != want {
			t.Errorf("Beside(%s, %q) = %q, want %q", tc.image, tc.rel, got, want)
		}
	}
}

func TestParseOverrides(t *testing.T) {
	known := []string{"CONFIG_X86_KERNEL_IBT", "CONFIG_CALL_PADDING", "CONFIG_FUNCTION_ALIGNMENT"}
	ints := []string{"CONFIG_FUNCTION_ALIGNMENT"}
	c, err := ParseOverrides("X86_KERNEL_IBT=n, CONFIG_CALL_PADDING=y,FUNCTION_ALIGNMENT=0x10", known, ints)
	if err != nil || c.Opts["CONFIG_X86_KERNEL_IBT"] != "n" || c.Opts["CONFIG_CALL_PADDING"] != "y" {
		t.Fatalf("%v %v", c, err)
	}
	if n, ok := c.Int("CONFIG_FUNCTION_ALIGNMENT"); !ok || n != 16 {
		t.Errorf("alignment %d %v", n, ok)
	}
	for _, bad := range []string{"", "IBT", "=y", "A B=y", "X86_KERNL_IBT=n", "X86_KERNEL_IBT=maybe", "FUNCTION_ALIGNMENT=16abc"} {
		if _, err := ParseOverrides(bad, known, ints); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParse: any input is a config or an error, never a panic; what
// parses keeps only CONFIG_ names.
func FuzzParse(f *testing.F) {
	f.Add([]byte("CONFIG_A=y\n# CONFIG_B is not set\n"))
	f.Add([]byte("IKCFG_ST\x1f\x8bIKCFG_ED"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := Parse("f", b); err == nil {
			for k := range c.Opts {
				if !strings.HasPrefix(k, "CONFIG_") {
					t.Fatalf("option %q", k)
				}
			}
		}
		Embedded(b)
		ParseOverrides(string(b), nil, nil)
	})
}
