package scenarios

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/kpsim/kpsim/image"
)

// SchemaVersion is the version of the JSON report's layout. It changes
// when a field is renamed, removed or changes meaning (added fields keep
// it). 2: meta block, integer cycles, every phase in sim.Phases() order. 3: a run's peak_bytes (process heap) became sim_retained_bytes (its own simulator structures).
const SchemaVersion = 3

// Meta is what a report says about how it was made, so that two reports
// made with a different build, kernel, cost file or fault set never look
// the same.
type Meta struct {
	Kpsim   Version    `json:"kpsim"`
	Kernel  KernelInfo `json:"kernel"`
	Costs   CostInfo   `json:"costs"`
	Faults  string     `json:"faults"`
	CPU     string     `json:"cpu_assumed"`
	Host    string     `json:"host_cpu"`
	Command []string   `json:"command,omitempty"`
}

// Version is the kpsim build: module version and VCS stamp from
// runtime/debug.ReadBuildInfo.
type Version struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"vcs_revision,omitempty"`
	Time     string `json:"vcs_time,omitempty"`
	Modified bool   `json:"vcs_modified,omitempty"`
	Go       string `json:"go"`
}

// String is the one-line form: "kpsim (devel) 1a2b3c4d5e6f+dirty go1.26".
func (v Version) String() string {
	s := "kpsim " + v.Version
	if v.Revision != "" {
		r := v.Revision
		if len(r) > 12 {
			r = r[:12]
		}
		s += " " + r
		if v.Modified {
			s += "+dirty"
		}
	} else {
		s += " (no VCS stamp: go test, -buildvcs=false or a git worktree; make build stamps one)"
	}
	return s + " " + v.Go
}

// vcsRevision is the revision the Makefile stamps with -ldflags -X
// (go's own stamp is missing in git worktrees and with -buildvcs=false);
// a "-dirty" suffix marks uncommitted changes.
var vcsRevision string

// BuildVersion reads this binary's version.
func BuildVersion() Version {
	v := Version{Module: "github.com/kpsim/kpsim", Version: "(unknown)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	if v.Revision == "" && vcsRevision != "" {
		v.Revision, v.Modified = strings.TrimSuffix(vcsRevision, "-dirty"), strings.HasSuffix(vcsRevision, "-dirty")
	}
	return v
}

// KernelInfo says which kernel image a report ran on: the generator's
// profile and every flag that differs from it, or a real image's path and
// SHA-256; its modules; and a digest of the modelled text either way.
type KernelInfo struct {
	Source  string            `json:"source"` // "synthetic" or "file"
	Name    string            `json:"name"`
	Profile string            `json:"profile,omitempty"`
	Flags   map[string]string `json:"flags,omitempty"` // non-default generator flags
	Path    string            `json:"path,omitempty"`
	SHA256  string            `json:"sha256,omitempty"` // of the file at Path
	Modules []string          `json:"modules"`
	// TextSHA256 hashes every text region's address and bytes: the same
	// for two runs exactly when they modelled the same text.
	TextSHA256 string `json:"text_sha256"`
	// Release is the kernel release (linux_banner), "" for synthetic
	// images; Generation the kernel generation the run modelled.
	Release    string `json:"release,omitempty"`
	Generation string `json:"generation"`
	// Facts are the build facts behaviour was decided on, each with its
	// source (the config file, --kconfig, a vote over the text).
	Facts []image.ConfigFact `json:"config_facts,omitempty"`
}

// String is the one-line form for table headers.
func (k KernelInfo) String() string {
	var b strings.Builder
	switch k.Source {
	case "file":
		fmt.Fprintf(&b, "%s sha256:%s", k.Path, short(k.SHA256))
	case "symbols":
		fmt.Fprintf(&b, "symbol file %s sha256:%s", k.Path, short(k.SHA256))
	default:
		fmt.Fprintf(&b, "synthetic profile=%s", k.Profile)
		for _, f := range sortedKeys(k.Flags) {
			fmt.Fprintf(&b, " --%s=%s", f, k.Flags[f])
		}
	}
	if k.Release != "" {
		fmt.Fprintf(&b, "; kernel %s", k.Release)
	}
	if k.Generation != "" {
		fmt.Fprintf(&b, "; generation %s", k.Generation)
	}
	if len(k.Facts) > 0 {
		fmt.Fprintf(&b, " (%s)", image.FactsOn(k.Facts))
	}
	if k.Source == "symbols" {
		return b.String() // no image: no modules, no text
	}
	fmt.Fprintf(&b, "; %d modules; text sha256:%s", len(k.Modules), short(k.TextSHA256))
	return b.String()
}

// CostInfo names the weights: the registered defaults or a cost file and
// its SHA-256.
type CostInfo struct {
	File      string `json:"file,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
	Overrides int    `json:"overrides"` // weights the file set
	Regime    string `json:"regime,omitempty"`
	// Clock converts the weights' cycles to estimated kernel time
	// (ClockFor: the weights' clock or --ghz).
	Clock Clock `json:"clock"`
}

// Line is the report header's line: "costs:   " and the one-line form.
func (c CostInfo) Line() string { return "costs:   " + c.String() }

// String is the one-line form.
func (c CostInfo) String() string {
	if c.File == "" {
		return "no cost file: the built-in weights below (docs/cost-model.md)"
	}
	return fmt.Sprintf("%s sha256:%s (%d weights set by the file)", c.File, short(c.SHA256), c.Overrides)
}

// DefaultCPU is the CPU the registered weights assume: the measured ones
// are Go micro-benchmarks on the reference machine converted at 2.6 GHz,
// the others documented cache latencies (each op's rationale says which).
const DefaultCPU = "the reference machine, an AMD EPYC at 2.6 GHz (Go micro-benchmarks as ns x 2.6), and documented load-to-use latencies (docs/cost-model.md)"

// KernelInfoFor describes k. path is the image file ("" for the
// generator); profile and flags describe a generated one.
func KernelInfoFor(k *image.Kernel, path, profile string, flags map[string]string) (KernelInfo, error) {
	ki := KernelInfo{Name: k.Name, Modules: []string{}}
	for _, m := range k.Modules {
		ki.Modules = append(ki.Modules, m.Name)
	}
	if path != "" {
		ki.Source, ki.Path = "file", path
		sum, err := FileSHA256(path)
		if err != nil {
			return ki, err
		}
		ki.SHA256 = sum
	} else {
		ki.Source, ki.Profile, ki.Flags = "synthetic", profile, flags
	}
	ki.TextSHA256 = TextDigest(k)
	ki.Release, ki.Generation, ki.Facts = k.Config.Version, k.Config.Gen.Effective().String(), k.Config.Facts
	return ki, nil
}

// TextDigest hashes every text region (vmlinux and modules): name,
// start address and bytes.
func TextDigest(k *image.Kernel) string {
	h := sha256.New()
	var b [8]byte
	add := func(r *image.Region) {
		if r == nil {
			return
		}
		io.WriteString(h, r.Name)
		binary.LittleEndian.PutUint64(b[:], r.Start)
		h.Write(b[:])
		binary.LittleEndian.PutUint64(b[:], uint64(len(r.Bytes)))
		h.Write(b[:])
		h.Write(r.Bytes)
	}
	for _, r := range k.Regions {
		add(r)
	}
	for _, m := range k.Modules {
		add(m.Text)
		add(m.Init)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// FileSHA256 hashes a file.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// HostCPU is /proc/cpuinfo's first "model name": the machine the wall
// times were taken on.
func HostCPU() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				return fmt.Sprintf("%s (%d CPUs online)", strings.TrimSpace(v), runtime.NumCPU())
			}
		}
	}
	return fmt.Sprintf("%s (%d CPUs)", runtime.GOARCH, runtime.NumCPU())
}

// Lines is the header every table report starts with.
func (m *Meta) Lines() []string {
	if m == nil {
		return nil
	}
	faults := m.Faults
	if faults == "" {
		faults = "none"
	}
	return []string{
		"version: " + m.Kpsim.String(),
		"kernel:  " + m.Kernel.String(),
		m.Costs.Line(),
		"clock:   " + m.Costs.Clock.Line(),
		"faults:  " + faults,
		"cpu:     weights assume " + m.CPU + "; sim wall (kpsim's own run time, not the kernel's) on " + m.Host,
	}
}

func short(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// KernelLabel names an image for a report header: its name, and the
// kernel release and generation the run modelled.
func KernelLabel(k *image.Kernel) string {
	return fmt.Sprintf("%s (%s)", k.Name, image.ReleaseLine(k.Config.Version, k.Config.Gen.Effective().String()))
}
