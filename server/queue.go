package server

import "sync"

// queue holds the requests waiting for a slot, oldest first.
type queue struct {
	mu   sync.Mutex
	jobs []*job
	wake chan struct{} // tells the idle scheduler that work arrived
}

func newQueue() *queue { return &queue{wake: make(chan struct{}, 1)} }

func (q *queue) push(j *job) {
	q.mu.Lock()
	q.jobs = append(q.jobs, j)
	q.mu.Unlock()
	q.poke()
}

func (q *queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) pop() *job {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) == 0 {
		return nil
	}
	j := q.jobs[0]
	q.jobs = q.jobs[1:]
	return j
}

// popIf pops the oldest request if ok accepts it.
func (q *queue) popIf(ok func(*job) bool) *job {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) == 0 || !ok(q.jobs[0]) {
		return nil
	}
	j := q.jobs[0]
	q.jobs = q.jobs[1:]
	return j
}

// remove takes out a request whose client left before it got a slot.
func (q *queue) remove(j *job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.jobs {
		if x == j {
			q.jobs = append(q.jobs[:i], q.jobs[i+1:]...)
			return
		}
	}
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.jobs)
}
