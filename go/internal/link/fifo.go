package link

// fifo is a first-in first-out queue on a slice that is compacted as it drains.
type fifo[E any] struct {
	items []E
	head  int
}

func (f *fifo[E]) push(e E)    { f.items = append(f.items, e) }
func (f *fifo[E]) len() int    { return len(f.items) - f.head }
func (f *fifo[E]) front() *E   { return &f.items[f.head] }
func (f *fifo[E]) at(i int) *E { return &f.items[f.head+i] }
func (f *fifo[E]) empty() bool { return f.head == len(f.items) }

func (f *fifo[E]) pop() E {
	var zero E
	e := f.items[f.head]
	f.items[f.head] = zero // let the payload go
	f.head++
	if f.head == len(f.items) {
		f.items, f.head = f.items[:0], 0
	} else if f.head >= 1024 && f.head*2 >= len(f.items) {
		n := copy(f.items, f.items[f.head:])
		clear(f.items[n:])
		f.items, f.head = f.items[:n], 0
	}
	return e
}
