package elfload

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/kpsim/kpsim/image"
)

// bannerPrefix starts init/version.c:linux_banner ("Linux version %s
// (builder) (compiler) #build ...").
const bannerPrefix = "Linux version "

// generation sets Config.Version from linux_banner and Config.Gen from it
// or from Options.Gen. linux_banner is found by its symbol, else by
// scanning .rodata for the banner's prefix (a stripped image whose
// kallsyms lacks it). No banner and no Options.Gen, or a release kpsim
// does not model, is an error: the generation decides table layouts and
// behaviour, and is never guessed.
func (l *loader) generation() error {
	c := &l.k.Config
	c.Version = l.banner()
	if l.opts.Gen != image.GenUnknown {
		c.Gen = l.opts.Gen
		if c.Version != "" {
			if g, err := image.ParseGeneration(c.Version); err != nil || g != c.Gen {
				l.k.Notes = append(l.k.Notes, fmt.Sprintf("kernel %s loaded as generation %s (--kernel-version)", c.Version, c.Gen))
			}
		}
		return nil
	}
	if c.Version == "" {
		return errors.New("kernel release unknown (no linux_banner \"Linux version ...\" in the image): --kernel-version names the generation (6.1, 6.12 or 7.3)")
	}
	g, err := image.ParseGeneration(c.Version)
	if err != nil {
		return fmt.Errorf("linux_banner: %v", err)
	}
	c.Gen = g
	return nil
}

// banner returns the release in linux_banner, "" when not found.
func (l *loader) banner() string {
	if a, ok := l.sym("linux_banner"); ok {
		if s := l.cstring(a); strings.HasPrefix(s, bannerPrefix) {
			return release(s)
		}
	}
	ro := l.f.Section(".rodata")
	if ro == nil {
		return ""
	}
	b, ok := l.read(ro.Addr, ro.Size)
	if !ok {
		return ""
	}
	i := bytes.Index(b, []byte(bannerPrefix))
	if i < 0 {
		return ""
	}
	e := bytes.IndexByte(b[i:], 0)
	if e < 0 || e > 512 {
		return ""
	}
	return release(string(b[i : i+e]))
}

// release takes the release out of a banner.
func release(banner string) string {
	r := strings.TrimPrefix(banner, bannerPrefix)
	if i := strings.IndexByte(r, ' '); i >= 0 {
		r = r[:i]
	}
	return r
}

// forcedGen adds to err that the image was read as another generation
// than its banner's (--kernel-version), the likely cause.
func (l *loader) forcedGen(err error) error {
	c := &l.k.Config
	if l.opts.Gen == image.GenUnknown || c.Version == "" {
		return err
	}
	if g, perr := image.ParseGeneration(c.Version); perr == nil && g == c.Gen {
		return err
	}
	return fmt.Errorf("%w (the image is %s, read as generation %s by --kernel-version)", err, c.Version, c.Gen)
}
