package main

import (
	"bytes"
	"encoding/hex"
	"fmt"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/elfload"
)

// writeBootSites writes one TSV line per site boot patching visited, in
// the order alternative_instructions visited them (paravirt, retpolines,
// returns, alternatives; a site in two tables appears twice). The file is
// written whole or not at all.
func writeBootSites(sink *atomicFile, k *image.Kernel, b *elfload.Booted) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# boot CPU %s\n# table\taddress\tsymbol+offset\taction\tbefore\tafter\n", k.BootCPU())
	if b != nil {
		for _, s := range b.Sites {
			where := "?"
			if f := k.LookupFunction(s.Addr); f != nil {
				where = fmt.Sprintf("%s+%#x", f.Name, s.Addr-f.Addr)
			}
			fmt.Fprintf(&buf, "%s\t%#x\t%s\t%s\t%s\t%s\n", s.Kind, s.Addr, where, s.Action, hex.EncodeToString(s.Before), hex.EncodeToString(s.After))
		}
	}
	return sink.commit(buf.Bytes())
}
