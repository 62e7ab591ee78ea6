package image

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The binary form of a Kernel, for the cache of generated and loaded
// images (package image/cache keeps the files). It is a flat, hand-rolled
// encoding: the tables are long slices of small structs (a distro image
// has ~10^5 symbols and jump entries) and encoding/gob spends most of its
// time on per-field reflection there, while this form decodes at memory
// speed. Strings go into one table and come back as substrings of a single
// string, one allocation for all of them; text bytes come back as slices
// of the buffer given to DecodeKernel.
//
// kernelFormat changes whenever the layout does. The cache also keys every
// entry by the kpsim build, so a changed struct never reads an old entry;
// the version guards files handed around by other means.
const kernelFormat = 3

// kernelMagic starts every encoded kernel.
const kernelMagic = "KPSIMK"

// EncodeKernel returns the binary form of k.
func EncodeKernel(k *Kernel) []byte {
	e := &encoder{strIdx: map[string]uint32{}}
	e.str(k.Name)
	e.config(k.Config)
	e.nilLen(k.Regions == nil, len(k.Regions))
	for _, r := range k.Regions {
		e.region(r)
	}
	e.symbols(k.Symbols)
	e.jumps(k.JumpEntries)
	e.scalls(k.StaticCallSites)
	e.bugs(k.BugEntries)
	e.extable(k.ExTable)
	e.u64s(k.Blacklist)
	e.ranges(k.Ranges)
	e.u64s(k.McountLocs)
	e.nilLen(k.Modules == nil, len(k.Modules))
	for _, m := range k.Modules {
		e.module(m)
	}
	e.u64s(k.ReturnSites)
	e.u64s(k.PVOps)
	e.strs(k.Notes)
	e.traceEvents(k.TraceEvents)

	// header, string table, body
	out := make([]byte, 0, len(kernelMagic)+16+len(e.strData)+4*len(e.strOff)+len(e.b))
	out = append(out, kernelMagic...)
	out = binary.LittleEndian.AppendUint32(out, kernelFormat)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(e.strOff)))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(e.strData)))
	out = append(out, e.strData...)
	for _, o := range e.strOff {
		out = binary.LittleEndian.AppendUint32(out, o)
	}
	return append(out, e.b...)
}

// DecodeKernel rebuilds a Kernel from EncodeKernel's output. Region and
// module text alias b, which the caller must not change afterwards.
func DecodeKernel(b []byte) (k *Kernel, err error) {
	if len(b) < len(kernelMagic)+16 || string(b[:len(kernelMagic)]) != kernelMagic {
		return nil, errors.New("not an encoded kernel")
	}
	b = b[len(kernelMagic):]
	if v := binary.LittleEndian.Uint32(b); v != kernelFormat {
		return nil, fmt.Errorf("encoded kernel format %d, want %d", v, kernelFormat)
	}
	nstr, slen := binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint64(b[8:])
	b = b[16:]
	if slen > uint64(len(b)) || uint64(nstr)*4 > uint64(len(b))-slen {
		return nil, errors.New("encoded kernel: string table truncated")
	}
	all := string(b[:slen])
	d := &decoder{b: b[slen+uint64(nstr)*4:]}
	offs := b[slen : slen+uint64(nstr)*4]
	d.strs = make([]string, nstr)
	prev := uint32(0)
	for i := range d.strs {
		o := binary.LittleEndian.Uint32(offs[4*i:])
		if o < prev || uint64(o) > slen {
			return nil, errors.New("encoded kernel: bad string table")
		}
		d.strs[i], prev = all[prev:o], o
	}
	defer func() {
		if r := recover(); r != nil {
			if de, ok := r.(decodeError); ok {
				k, err = nil, de
				return
			}
			panic(r)
		}
	}()
	k = &Kernel{}
	k.Name = d.str()
	k.Config = d.config()
	if n := d.count(1); n >= 0 {
		k.Regions = make([]*Region, n)
		for i := range k.Regions {
			k.Regions[i] = d.region()
		}
	}
	k.Symbols = d.symbols()
	k.JumpEntries = d.jumps()
	k.StaticCallSites = d.scalls()
	k.BugEntries = d.bugs()
	k.ExTable = d.extable()
	k.Blacklist = d.u64s()
	k.Ranges = d.ranges()
	k.McountLocs = d.u64s()
	if n := d.count(1); n >= 0 {
		k.Modules = make([]*Module, n)
		for i := range k.Modules {
			k.Modules[i] = d.module()
		}
	}
	k.ReturnSites = d.u64s()
	k.PVOps = d.u64s()
	k.Notes = d.strList()
	k.TraceEvents = d.traceEvents()
	if len(d.b) != 0 {
		return nil, fmt.Errorf("encoded kernel: %d trailing bytes", len(d.b))
	}
	return k, nil
}

type encoder struct {
	b       []byte
	strData []byte
	strOff  []uint32 // end offset of each string
	strIdx  map[string]uint32
}

func (e *encoder) u64(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) fixed64(v uint64) {
	e.b = binary.LittleEndian.AppendUint64(e.b, v)
}
func (e *encoder) boolean(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

// str writes a string as its index in the table (0 is "").
func (e *encoder) str(s string) {
	if s == "" {
		e.u64(0)
		return
	}
	i, ok := e.strIdx[s]
	if !ok {
		e.strData = append(e.strData, s...)
		e.strOff = append(e.strOff, uint32(len(e.strData)))
		i = uint32(len(e.strOff))
		e.strIdx[s] = i
	}
	e.u64(uint64(i))
}

func (e *encoder) strs(l []string) {
	e.nilLen(l == nil, len(l))
	for _, s := range l {
		e.str(s)
	}
}

// nilLen writes a slice length, keeping nil apart from empty (0: nil).
func (e *encoder) nilLen(isNil bool, n int) {
	if isNil {
		e.u64(0)
		return
	}
	e.u64(uint64(n) + 1)
}

func (e *encoder) u64s(l []uint64) {
	e.nilLen(l == nil, len(l))
	for _, v := range l {
		e.fixed64(v)
	}
}

func (e *encoder) bytes(l []byte) {
	e.nilLen(l == nil, len(l))
	e.b = append(e.b, l...)
}

func (e *encoder) config(c Config) {
	for _, v := range []bool{c.IBT, c.Retpoline, c.RetThunk, c.ReturnsPatched, c.KprobesOnFtrace, c.CFI, c.BugVerbose} {
		e.boolean(v)
	}
	e.str(c.CPU)
	e.str(c.Version)
	e.b = append(e.b, byte(c.Gen))
	e.boolean(c.CallPadding)
	e.fixed64(uint64(c.FunctionAlignment))
	e.nilLen(c.Facts == nil, len(c.Facts))
	for _, f := range c.Facts {
		e.str(f.Option)
		e.str(f.Value)
		e.str(f.From)
	}
}

func (e *encoder) region(r *Region) {
	if r == nil {
		e.boolean(false)
		return
	}
	e.boolean(true)
	e.str(r.Name)
	e.b = append(e.b, byte(r.Kind))
	e.str(r.Module)
	e.fixed64(r.Start)
	e.bytes(r.Bytes)
}

func (e *encoder) symbols(l []Symbol) {
	e.nilLen(l == nil, len(l))
	for _, s := range l {
		e.str(s.Name)
		e.fixed64(s.Addr)
		e.u64(s.Size)
		e.b = append(e.b, byte(s.Type))
		e.str(s.Module)
	}
}

func (e *encoder) jumps(l []JumpEntry) {
	e.nilLen(l == nil, len(l))
	for _, j := range l {
		e.fixed64(j.Code)
		e.fixed64(j.Target)
		e.fixed64(j.Key)
		e.b = append(e.b, b2(j.Branch, j.Init))
	}
}

func (e *encoder) scalls(l []StaticCallSite) {
	e.nilLen(l == nil, len(l))
	for _, s := range l {
		e.fixed64(s.Addr)
		e.fixed64(s.Key)
		e.b = append(e.b, b2(s.Tail, s.Init))
	}
}

func (e *encoder) bugs(l []BugEntry) {
	e.nilLen(l == nil, len(l))
	for _, b := range l {
		e.fixed64(b.Addr)
		e.str(b.File)
		e.u64(uint64(b.Line))
		e.u64(uint64(b.Flags))
	}
}

func (e *encoder) extable(l []ExEntry) {
	e.nilLen(l == nil, len(l))
	for _, x := range l {
		e.fixed64(x.Insn)
		e.fixed64(x.Fixup)
	}
}

func (e *encoder) ranges(l []Range) {
	e.nilLen(l == nil, len(l))
	for _, r := range l {
		e.str(r.Name)
		e.fixed64(r.Start)
		e.fixed64(r.End)
	}
}

func (e *encoder) module(m *Module) {
	e.str(m.Name)
	e.b = append(e.b, byte(m.State))
	e.region(m.Text)
	e.region(m.Init)
	e.symbols(m.Symbols)
	e.jumps(m.JumpEntries)
	e.scalls(m.StaticCallSites)
	e.bugs(m.BugEntries)
	e.extable(m.ExTable)
	e.u64s(m.Blacklist)
	e.u64s(m.McountLocs)
	e.ranges(m.Ranges)
	e.traceEvents(m.TraceEvents)
}

// traceEvents writes a _ftrace_events table (nil kept apart from empty).
func (e *encoder) traceEvents(l []TraceEvent) {
	e.nilLen(l == nil, len(l))
	for _, t := range l {
		e.str(t.System)
		e.str(t.Name)
	}
}

func b2(a, b bool) byte {
	var v byte
	if a {
		v |= 1
	}
	if b {
		v |= 2
	}
	return v
}

type decodeError string

func (e decodeError) Error() string { return "encoded kernel: " + string(e) }

type decoder struct {
	b    []byte
	strs []string
}

func (d *decoder) fail(what string) { panic(decodeError(what + " truncated or corrupt")) }

func (d *decoder) u64() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("varint")
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) fixed64() uint64 {
	if len(d.b) < 8 {
		d.fail("u64")
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) byte1() byte {
	if len(d.b) < 1 {
		d.fail("byte")
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) boolean() bool { return d.byte1() != 0 }

func (d *decoder) str() string {
	i := d.u64()
	if i == 0 {
		return ""
	}
	if i > uint64(len(d.strs)) {
		d.fail("string index")
	}
	return d.strs[i-1]
}

// count reads a length written by nilLen; -1 is nil. Each element takes
// at least min bytes, so a corrupt length cannot ask for a huge slice.
func (d *decoder) count(min int) int {
	v := d.u64()
	if v == 0 {
		return -1
	}
	n := v - 1
	if n > uint64(len(d.b)) || (min > 0 && n > uint64(len(d.b))/uint64(min)) || n > math.MaxInt32 {
		d.fail("length")
	}
	return int(n)
}

func (d *decoder) strList() []string {
	n := d.count(1)
	if n < 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.str()
	}
	return out
}

func (d *decoder) u64s() []uint64 {
	n := d.count(8)
	if n < 0 {
		return nil
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(d.b[8*i:])
	}
	d.b = d.b[8*n:]
	return out
}

func (d *decoder) bytes() []byte {
	n := d.count(1)
	if n < 0 {
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) config() Config {
	var c Config
	for _, p := range []*bool{&c.IBT, &c.Retpoline, &c.RetThunk, &c.ReturnsPatched, &c.KprobesOnFtrace, &c.CFI, &c.BugVerbose} {
		*p = d.boolean()
	}
	c.CPU = d.str()
	c.Version = d.str()
	if c.Gen = Generation(d.byte1()); c.Gen > Gen73 {
		d.fail("generation")
	}
	c.CallPadding = d.boolean()
	c.FunctionAlignment = int(d.fixed64())
	if n := d.count(3); n >= 0 {
		c.Facts = make([]ConfigFact, n)
		for i := range c.Facts {
			c.Facts[i] = ConfigFact{Option: d.str(), Value: d.str(), From: d.str()}
		}
	}
	return c
}

func (d *decoder) region() *Region {
	if !d.boolean() {
		return nil
	}
	r := &Region{Name: d.str(), Kind: RegionKind(d.byte1()), Module: d.str(), Start: d.fixed64()}
	r.Bytes = d.bytes()
	return r
}

func (d *decoder) symbols() []Symbol {
	n := d.count(11)
	if n < 0 {
		return nil
	}
	out := make([]Symbol, n)
	for i := range out {
		s := &out[i]
		s.Name = d.str()
		s.Addr = d.fixed64()
		s.Size = d.u64()
		s.Type = SymType(d.byte1())
		s.Module = d.str()
	}
	return out
}

func (d *decoder) jumps() []JumpEntry {
	n := d.count(25)
	if n < 0 {
		return nil
	}
	out := make([]JumpEntry, n)
	for i := range out {
		f := d.b[25*i:]
		out[i] = JumpEntry{Code: le64(f), Target: le64(f[8:]), Key: le64(f[16:]), Branch: f[24]&1 != 0, Init: f[24]&2 != 0}
	}
	d.b = d.b[25*n:]
	return out
}

func (d *decoder) scalls() []StaticCallSite {
	n := d.count(17)
	if n < 0 {
		return nil
	}
	out := make([]StaticCallSite, n)
	for i := range out {
		f := d.b[17*i:]
		out[i] = StaticCallSite{Addr: le64(f), Key: le64(f[8:]), Tail: f[16]&1 != 0, Init: f[16]&2 != 0}
	}
	d.b = d.b[17*n:]
	return out
}

func (d *decoder) bugs() []BugEntry {
	n := d.count(11)
	if n < 0 {
		return nil
	}
	out := make([]BugEntry, n)
	for i := range out {
		b := &out[i]
		b.Addr = d.fixed64()
		b.File = d.str()
		b.Line = uint16(d.u64())
		b.Flags = uint16(d.u64())
	}
	return out
}

func (d *decoder) extable() []ExEntry {
	n := d.count(16)
	if n < 0 {
		return nil
	}
	out := make([]ExEntry, n)
	for i := range out {
		out[i] = ExEntry{Insn: le64(d.b[16*i:]), Fixup: le64(d.b[16*i+8:])}
	}
	d.b = d.b[16*n:]
	return out
}

func (d *decoder) ranges() []Range {
	n := d.count(17)
	if n < 0 {
		return nil
	}
	out := make([]Range, n)
	for i := range out {
		out[i] = Range{Name: d.str(), Start: d.fixed64(), End: d.fixed64()}
	}
	return out
}

func (d *decoder) module() *Module {
	m := &Module{Name: d.str(), State: ModuleState(d.byte1())}
	m.Text = d.region()
	m.Init = d.region()
	m.Symbols = d.symbols()
	m.JumpEntries = d.jumps()
	m.StaticCallSites = d.scalls()
	m.BugEntries = d.bugs()
	m.ExTable = d.extable()
	m.Blacklist = d.u64s()
	m.McountLocs = d.u64s()
	m.Ranges = d.ranges()
	m.TraceEvents = d.traceEvents()
	return m
}

func (d *decoder) traceEvents() []TraceEvent {
	n := d.count(2)
	if n < 0 {
		return nil
	}
	out := make([]TraceEvent, n)
	for i := range out {
		out[i] = TraceEvent{System: d.str(), Name: d.str()}
	}
	return out
}

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
