package collector

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wva-project/wva/pkg/config"
)

// The shortest retention period a ConfigMap may set is the rate window, and
// its idle window is not widened: an idle check then reads exactly the
// scrapes the rate queries are sized for.
func TestIdleWindowAtTheRetentionFloor(t *testing.T) {
	assert.Equal(t, RateWindow, config.MinRetentionPeriod)
	assert.Equal(t, RateWindow, IdleWindow(config.MinRetentionPeriod), "the shortest period's idle window is not widened")
}
