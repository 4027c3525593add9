package scalefromzero

import (
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// samplePeak reads the runtime's memory statistics every interval until
// the returned stop is called; stop returns the highest measure seen.
func samplePeak(interval time.Duration, measure func(*runtime.MemStats) uint64) (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if n := measure(&ms); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(interval):
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-sampled
		return peak.Load()
	}
}

func heapAlloc(ms *runtime.MemStats) uint64         { return ms.HeapAlloc }
func heapInuse(ms *runtime.MemStats) uint64         { return ms.HeapInuse }
func heapAndStackInuse(ms *runtime.MemStats) uint64 { return ms.HeapInuse + ms.StackInuse }
