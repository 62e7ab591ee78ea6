package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kpsim/kpsim/image/cache"
)

// cacheCommand is listed in main.go's command table.
var cacheCommand = command{"cache", cacheUsage, cacheDoc, runCache}

const (
	cacheUsage = "kpsim cache list [--format table|json] | kpsim cache size | kpsim cache clean [--older-than DURATION] [--all] [--max SIZE]"
	cacheDoc   = "list, size and clean kpsim's cache (kernels, images, kallsyms tables), capped at $KPSIM_CACHE_MAX (default 1GiB)"
)

// runCache is kpsim cache: what the image cache (package image/cache)
// holds, and its removal. Removing is always safe: an entry is rebuilt
// when next needed, and a kpsim reading one meanwhile keeps its bytes or
// misses (entries are only ever renamed into place).
func runCache(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("missing action: list, size or clean")
	}
	switch args[0] {
	case "list":
		return cacheList(args[1:], stdout)
	case "size":
		return cacheSize(args[1:], stdout)
	case "clean":
		return cacheClean(args[1:], stdout)
	case "-h", "--help", "-help", "help":
		fmt.Fprintf(stdout, "usage: %s\n\n%s.\n\n%s", cacheUsage, cacheDoc, cacheHelp)
		return errHelp
	}
	return usagef("unknown action %q (list, size or clean)%s", args[0], didYouMean(args[0], []string{"list", "size", "clean"}))
}

const cacheHelp = `Actions:
  list   every file, least recently used first: kind, key, size, last use, what the key covers
  size   the root, the entry count, the bytes and the cap
  clean  without flags: trim to the cap; --all: remove every entry; --older-than D: the entries
         not used for D (7d, 36h, 90m); --max SIZE: trim to SIZE (500M, 2G), least recently used first

After every write kpsim trims the cache to its cap, least recently used first (a hit counts as a
use). The cap is $KPSIM_CACHE_MAX (bytes, or K, M, G, T: 1024-based), default 1GiB. Removing an
entry is always safe: it is rebuilt when next needed, and a kpsim reading it meanwhile keeps its
bytes or misses.
`

// cacheHeader is the root and the cap, the first line of list and size.
func cacheHeader(w io.Writer, es []cache.Entry) {
	max, err := cache.MaxSize()
	capNote := ""
	if err != nil {
		capNote = " (" + err.Error() + ")"
	}
	root := cache.Root()
	if root == "" {
		root = "(none: no $KPSIM_CACHE_DIR and no user cache directory)"
	}
	from := "default; KPSIM_CACHE_MAX sets it"
	if os.Getenv("KPSIM_CACHE_MAX") != "" {
		from = "KPSIM_CACHE_MAX" + capNote
	}
	fmt.Fprintf(w, "cache %s: %d entries, %s (cap %s, %s)\n", root, countEntries(es), cache.FormatSize(cache.Total(es)), cache.FormatSize(max), from)
}

func countEntries(es []cache.Entry) int {
	n := 0
	for _, e := range es {
		if !e.Temp {
			n++
		}
	}
	return n
}

func cacheList(args []string, stdout io.Writer) error {
	fs := newFlagSet("cache list", stdout)
	format := fs.String("format", "table", "output: table or json")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return usagef("--format: want table or json, got %q", *format)
	}
	es, err := cache.Entries()
	if err != nil {
		return err
	}
	if *format == "json" {
		type entry struct {
			Kind    string    `json:"kind"`
			Name    string    `json:"name"`
			Path    string    `json:"path"`
			Bytes   int64     `json:"bytes"`
			Used    time.Time `json:"last_used"`
			Temp    bool      `json:"temporary,omitempty"`
			KeyedOn string    `json:"keyed_on,omitempty"`
		}
		out := []entry{}
		for _, e := range es {
			out = append(out, entry{e.Kind, e.Name, e.Path, e.Size, e.Used.UTC(), e.Temp, e.KeyedOn})
		}
		return writeJSON(stdout, out)
	}
	cacheHeader(stdout, es)
	if len(es) == 0 {
		return nil
	}
	fmt.Fprintln(stdout, "least recently used first:")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "kind\tentry\tsize\tlast used\tkeyed on")
	now := time.Now()
	for _, e := range es {
		name, keyed := e.Name, e.KeyedOn
		if len(name) > 20 {
			name = name[:20] + "…"
		}
		if e.Temp {
			keyed = "a write in progress (or a dead one's, removed after " + cache.StaleTemp.String() + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\t%s\n", e.Kind, name, cache.FormatSize(e.Size), age(now.Sub(e.Used)), keyed)
	}
	return tw.Flush()
}

// age is a duration rounded for a listing: 3d4h, 5h12m, 40s.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	case d >= time.Hour:
		return fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	case d >= time.Minute:
		return fmt.Sprintf("%dm%ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	return fmt.Sprintf("%ds", int(d/time.Second))
}

func cacheSize(args []string, stdout io.Writer) error {
	fs := newFlagSet("cache size", stdout)
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	es, err := cache.Entries()
	if err != nil {
		return err
	}
	cacheHeader(stdout, es)
	return nil
}

// parseAge reads --older-than: a Go duration (90m, 36h) or days (7d).
func parseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("want a duration such as 7d, 36h or 90m, got %q", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want a duration such as 7d, 36h or 90m, got %q", s)
	}
	return d, nil
}

func cacheClean(args []string, stdout io.Writer) error {
	fs := newFlagSet("cache clean", stdout)
	all := fs.Bool("all", false, "remove every entry (and every temporary file older than "+cache.StaleTemp.String()+")")
	older := fs.String("older-than", "", "remove the entries not used for this long: 7d, 36h, 90m")
	maxFlag := fs.String("max", "", "trim to this size, least recently used first (e.g. 500M, 2G); default: the cap, $KPSIM_CACHE_MAX or 1GiB")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if *all && (*older != "" || *maxFlag != "") {
		return usagef("--all: removes everything; --older-than and --max choose what to keep")
	}
	var maxAge time.Duration
	if *older != "" {
		d, err := parseAge(*older)
		if err != nil {
			return usagef("--older-than: %v", err)
		}
		maxAge = d
	}
	max, err := cache.MaxSize()
	if err != nil && *maxFlag == "" {
		return usagef("%v", err)
	}
	if *maxFlag != "" {
		if max, err = cache.ParseSize(*maxFlag); err != nil {
			return usagef("--max: %v", err)
		}
	}
	es, err := cache.Entries()
	if err != nil {
		return err
	}
	before := cache.Total(es)
	var removed []cache.Entry
	now := time.Now()
	if *all || *older != "" {
		var drop []cache.Entry
		for _, e := range es {
			idle := now.Sub(e.Used)
			if e.Temp && idle <= cache.StaleTemp {
				continue // a write in progress
			}
			if *all || idle > maxAge {
				drop = append(drop, e)
			}
		}
		removed = cache.Remove(drop)
	}
	if !*all && (*older == "" || *maxFlag != "") {
		r, err := cache.Trim(max, "")
		if err != nil {
			return err
		}
		removed = append(removed, r...)
	}
	left, err := cache.Entries()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed %d files (%s of %s); ", len(removed), cache.FormatSize(cache.Total(removed)), cache.FormatSize(before))
	cacheHeader(stdout, left)
	return nil
}
