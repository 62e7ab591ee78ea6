package scenarios

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool bounds how many runs run at once, across every RunMany that shares
// it (a sweep's points share one, so its runs never exceed the bound).
type Pool struct{ sem chan struct{} }

// NewPool returns a pool of n slots; n <= 0 means runtime.GOMAXPROCS(0)
// (all cores).
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return &Pool{sem: make(chan struct{}, n)}
}

// Size is how many runs the pool lets run at once.
func (p *Pool) Size() int { return cap(p.sem) }

func (p *Pool) acquire() { p.sem <- struct{}{} }
func (p *Pool) release() { <-p.sem }

// sharedProgress merges the progress of runs that run at once into one
// report to the caller's Progress: a single bar over every run's probes,
// named after the runs still going, so overlapping runs never fight over
// one terminal line.
type sharedProgress struct {
	mu       sync.Mutex
	to       Progress
	runs     int
	total    int
	done     []int
	finished int
	started  bool
}

// newSharedProgress returns one Progress per run (runs of per probes
// each) feeding to.
func newSharedProgress(to Progress, runs, per int) []Progress {
	sp := &sharedProgress{to: to, runs: runs, total: runs * per, done: make([]int, runs)}
	out := make([]Progress, runs)
	for i := range out {
		out[i] = &runProgress{sp: sp, i: i}
	}
	return out
}

type runProgress struct {
	sp *sharedProgress
	i  int
}

func (p *runProgress) Start(run string, total int) {
	sp := p.sp
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.started {
		sp.started = true
		sp.to.Start(fmt.Sprintf("%d runs", sp.runs), sp.total)
	}
}

func (p *runProgress) Update(done int) {
	sp := p.sp
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.done[p.i] = done
	sp.to.Update(sp.sum())
}

func (p *runProgress) Done() {
	sp := p.sp
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.finished++
	sp.done[p.i] = sp.total / sp.runs
	sp.to.Update(sp.sum())
}

func (sp *sharedProgress) sum() int {
	n := 0
	for _, d := range sp.done {
		n += d
	}
	return n
}

// forEach runs f(0), ..., f(n-1), jobs at a time (jobs <= 0: GOMAXPROCS),
// starting them in index order and none after one failed, and returns
// the error of the lowest failing index: what a serial loop returns. f
// must write only its own index's results.
func forEach(n, jobs int, f func(i int) error) error {
	p := NewPool(jobs)
	if p.Size() == 1 || n < 2 {
		for i := 0; i < n; i++ {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, n)
	var failed atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		p.acquire()
		if failed.Load() {
			p.release()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.release()
			if errs[i] = f(i); errs[i] != nil {
				failed.Store(true)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
