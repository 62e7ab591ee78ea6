package trace

import (
	"fmt"
	"strconv"

	"github.com/kpsim/kpsim/rhashtable"
	"github.com/kpsim/kpsim/sim"
)

// The trace-event-index patch (sim.TraceEventIndex, beyond the series).
// Upstream, find_trace_kprobe walks every entry of dyn_event_list and
// find_trace_event_call every trace event on ftrace_events, once per line
// written to kprobe_events. The patch keeps two hash tables beside the
// lists: the kprobe trace_probe_events by (group, event), which
// find_trace_kprobe asks instead of the walk, and every trace_event_call by
// (system, name), which find_trace_event_call asks. Each table is an array
// of 2^k hlist heads; a node (an hlist_node and the key's u32 hash,
// embedded in the indexed struct) goes at the head of bucket
// hash & (2^k - 1), where hash = jhash(name, jhash(group, 0)). A lookup
// walks one chain comparing the stored hash, then strcmp's the name and,
// when it matches, the group. When an insert leaves more entries than 3/4
// of the buckets, the table doubles and every node is moved (under
// event_mutex, as the insert). late_initcall(trace_event_index_init)
// allocates both tables and hashes every trace event on ftrace_events (the
// static ones, and any created before it) and every kprobe event;
// afterwards __register_event and dyn_event_add insert and the removals
// delete (hlist_del_rcu: no walk). A failed allocation at late init leaves
// no index: both lookups stay the linear walks. A failed allocation when
// growing keeps the old table (longer chains, same answers).
//
// kpsim does not know the static events' names or systems (only their
// count), so each is hashed under a placeholder key no written group can
// equal ("\x00static" and its number): the chains they lengthen are what
// matters, and a placeholder spreads over the buckets as a real name does.

// indexMinSize is the smallest table: rhashtable's HASH_DEFAULT_SIZE, 64.
const indexMinSize = 64

// indexNodeBytes is what each indexed struct grows by: an hlist_node (two
// pointers) and the u32 hash (its padding not counted).
const indexNodeBytes = 16 + 4

// staticGroup is the placeholder system of the static events.
const staticGroup = "\x00static"

// indexNode is one entry of a table: the key, its hash, and the event (nil
// for a static trace event).
type indexNode struct {
	hash        uint32
	group, name string
	ev          *Event
}

// nameTable is one hash table of the index. Each chain holds its nodes
// head first.
type nameTable struct {
	chains [][]*indexNode
	n      int
}

func newNameTable(size int) *nameTable { return &nameTable{chains: make([][]*indexNode, size)} }

func (tb *nameTable) size() int { return len(tb.chains) }

func (tb *nameTable) bucket(h uint32) int { return int(h & uint32(len(tb.chains)-1)) }

func (tb *nameTable) bytes() int64 {
	return int64(8*len(tb.chains)) + int64(indexNodeBytes*tb.n)
}

// eventIndex is the pair of tables.
type eventIndex struct {
	dyn   *nameTable // trace_probe_events of trace_kprobes by (group, event)
	calls *nameTable // trace_event_calls by (system, name)
}

func (x *eventIndex) bytes() int64 { return x.dyn.bytes() + x.calls.bytes() }

// keyHash hashes (group, name) and counts the bytes hashed.
func keyHash(c *sim.Counters, group, name string) uint32 {
	c.Add(opIdxHashByte, uint64(len(group)+len(name)))
	return rhashtable.Jhash(name, rhashtable.Jhash(group, 0))
}

// find walks the chain of (group, name): the stored hash of each node, then
// strcmp of the name and, on a name match, of the group. It returns the
// first node that matches.
func (tb *nameTable) find(c *sim.Counters, group, name string) *indexNode {
	h := keyHash(c, group, name)
	c.Inc(opIdxBucket)
	for _, nd := range tb.chains[tb.bucket(h)] {
		c.Inc(opIdxVisit)
		if nd.hash != h {
			continue
		}
		c.Inc(opStrcmp)
		if nd.name != name {
			continue
		}
		c.Inc(opStrcmp)
		if nd.group == group {
			return nd
		}
	}
	return nil
}

// insert hashes the key and links a node at the head of its bucket
// (hlist_add_head_rcu); growing is the caller's (insert reports whether
// the table is above 3/4 full).
func (tb *nameTable) insert(c *sim.Counters, group, name string, ev *Event) bool {
	h := keyHash(c, group, name)
	c.Inc(opIdxBucket)
	c.Inc(opIdxLink)
	b := tb.bucket(h)
	tb.chains[b] = append([]*indexNode{{hash: h, group: group, name: name, ev: ev}}, tb.chains[b]...)
	tb.n++
	return tb.n > len(tb.chains)/4*3
}

// remove unlinks ev's node (hlist_del_rcu: the node knows its place, no
// walk and no hash). The simulator finds the node by its key.
func (tb *nameTable) remove(c *sim.Counters, ev *Event) {
	c.Inc(opIdxLink)
	b := tb.bucket(rhashtable.Jhash(ev.Name, rhashtable.Jhash(ev.Group, 0)))
	for i, nd := range tb.chains[b] {
		if nd.ev == ev {
			tb.chains[b] = append(tb.chains[b][:i:i], tb.chains[b][i+1:]...)
			tb.n--
			return
		}
	}
	panic(fmt.Sprintf("trace: event index: %s/%s is not indexed", ev.Group, ev.Name))
}

// growIndex models the patch's trace_event_index_grow: a table of twice the
// buckets (kvcalloc: one allocation, each head zeroed), every node moved to
// the head of its new bucket (old buckets in order, each chain head first;
// the stored hash is reused), the old array freed. A failed allocation
// keeps the old table.
func (t *Tracing) growIndex(tb *nameTable) {
	c := t.counters()
	c.Inc(opKmalloc)
	if t.d.Faults.Fail(FaultEventIndexAlloc) {
		return
	}
	nt := newNameTable(2 * tb.size())
	c.Add(opIdxBucketInit, uint64(nt.size()))
	for _, chain := range tb.chains {
		for _, nd := range chain {
			c.Inc(opIdxRehash)
			b := nt.bucket(nd.hash)
			nt.chains[b] = append([]*indexNode{nd}, nt.chains[b]...)
		}
	}
	nt.n = tb.n
	c.Inc(opKmalloc) // kvfree of the old array
	*tb = *nt
}

// LateInit models the patch's late_initcall(trace_event_index_init): with
// sim.TraceEventIndex, allocate both tables (the trace-event table sized
// for the events on ftrace_events at 3/4 load, the kprobe-event table at
// its minimum or for the kprobe events already created) and hash every
// trace event (static ones first, then the dynamic ones in creation
// order) and every kprobe event into them. A failed allocation
// (trace.event_index.alloc) leaves no index: the linear walks answer.
// Without the switch, or when run again, it does nothing.
func (t *Tracing) LateInit(c *sim.Counters) {
	if !t.sw.Has(sim.TraceEventIndex) || t.lateDone {
		return
	}
	t.lateDone = true
	c.Inc(opKmalloc) // the trace-event table; a failure stops here
	if t.d.Faults.Fail(FaultEventIndexAlloc) {
		return
	}
	c.Inc(opKmalloc) // the kprobe-event table
	live := t.Events()
	x := &eventIndex{
		calls: newNameTable(indexSizeFor(t.cfg.StaticEvents + len(live))),
		dyn:   newNameTable(indexSizeFor(len(live))),
	}
	c.Add(opIdxBucketInit, uint64(x.calls.size()+x.dyn.size()))
	// The static events, in the order they were registered (vmlinux's
	// section, then each module's), under their system and name; an
	// unnamed one under a placeholder no written group equals.
	i := 0
	for _, seg := range t.cfg.Static {
		for j := range seg.len() {
			g, n := staticGroup, strconv.Itoa(i)
			if seg.Events != nil && seg.Events[j].System != "" {
				g, n = seg.Events[j].System, seg.Events[j].Name
			}
			x.calls.insert(c, g, n, nil)
			i++
		}
	}
	for _, ev := range live {
		x.calls.insert(c, ev.Group, ev.Name, ev)
		x.dyn.insert(c, ev.Group, ev.Name, ev)
	}
	t.idx = x
	t.recordIndexBytes(c)
}

// Indexed reports whether trace-event-index's tables are built (the
// switch is on, late init ran and its allocation did not fail).
func (t *Tracing) Indexed() bool { return t.idx != nil }

// indexSizeFor is the smallest power of two, at least indexMinSize, that
// holds n entries at no more than 3/4 load.
func indexSizeFor(n int) int {
	size := indexMinSize
	for n > size/4*3 {
		size *= 2
	}
	return size
}

func (t *Tracing) recordIndexBytes(c *sim.Counters) {
	c.SetBytes("trace.event_index.bytes", t.idx.bytes())
}

// findTraceKprobeIndexed models the core of
// kernel/trace/trace_kprobe.c:find_trace_kprobe with kpsim's
// trace-event-index: hash (group, event), walk one chain of the
// kprobe-event table, and return the event's first trace_kprobe
// (list_first_entry of its probes: the one dyn_event_list holds first).
func (t *Tracing) findTraceKprobeIndexed(name, group string) *TraceKprobe {
	c := t.counters()
	nd := t.idx.dyn.find(c, group, name)
	if nd == nil {
		return nil
	}
	c.Inc(opConst) // list_first_entry
	return nd.ev.probes[0]
}

// findTraceEventCallIndexed models the core of
// kernel/trace/trace_probe.c:find_trace_event_call with kpsim's
// trace-event-index: hash (system, name) and walk one chain of the
// trace-event table.
func (t *Tracing) findTraceEventCallIndexed(system, name string) (*Event, bool) {
	nd := t.idx.calls.find(t.counters(), system, name)
	if nd == nil {
		return nil, false
	}
	return nd.ev, true
}

// indexAdd inserts ev into one table (growing it past 3/4 load).
func (t *Tracing) indexAdd(tb *nameTable, ev *Event) {
	if tb.insert(t.counters(), ev.Group, ev.Name, ev) {
		t.growIndex(tb)
	}
	t.recordIndexBytes(t.counters())
}

// indexRemove unlinks ev from one table.
func (t *Tracing) indexRemove(tb *nameTable, ev *Event) {
	tb.remove(t.counters(), ev)
	t.recordIndexBytes(t.counters())
}

// checkIndex: the index holds the static events and exactly the live
// kprobe events (on ftrace_events: calls; on dyn_event_list: dyn), each in
// the bucket of its hash.
func (t *Tracing) checkIndex() error {
	if t.idx == nil {
		return nil
	}
	onCalls := t.Events()
	for _, tc := range []struct {
		name string
		tb   *nameTable
		want int
	}{{"calls", t.idx.calls, t.cfg.StaticEvents + len(onCalls)}, {"dyn", t.idx.dyn, len(t.events)}} {
		n := 0
		for b, chain := range tc.tb.chains {
			for _, nd := range chain {
				n++
				if nd.hash != rhashtable.Jhash(nd.name, rhashtable.Jhash(nd.group, 0)) || tc.tb.bucket(nd.hash) != b {
					return fmt.Errorf("trace: event index %s: %q/%q in bucket %d, hash %#x", tc.name, nd.group, nd.name, b, nd.hash)
				}
				if nd.ev == nil {
					if tc.tb != t.idx.calls {
						return fmt.Errorf("trace: event index %s: node %q/%q without an event", tc.name, nd.group, nd.name)
					}
					continue
				}
				if tc.tb == t.idx.dyn && t.events[eventKey{nd.group, nd.name}] != nd.ev {
					return fmt.Errorf("trace: event index dyn holds %s/%s, which is no live kprobe event", nd.group, nd.name)
				}
			}
		}
		if n != tc.tb.n || n != tc.want {
			return fmt.Errorf("trace: event index %s holds %d nodes (counted %d), want %d", tc.name, n, tc.tb.n, tc.want)
		}
	}
	for _, ev := range onCalls {
		if nd := t.idx.calls.find(nil, ev.Group, ev.Name); nd == nil || nd.ev != ev {
			return fmt.Errorf("trace: event index calls misses %s/%s", ev.Group, ev.Name)
		}
	}
	return nil
}
