package fleet

import (
	"runtime"
	"sync"
)

// Parallel runs do(i) for i in [0, n) on GOMAXPROCS goroutines.
func Parallel(n int, do func(i int)) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				do(i)
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}
