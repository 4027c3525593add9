package collector

import (
	"testing"

	"github.com/stretchr/testify/assert"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/config"
)

// The shortest retention period a ConfigMap may set is the rate window, and
// its idle window is not widened: an idle check then reads exactly the
// scrapes the rate queries are sized for.
func TestIdleWindowAtTheRetentionFloor(t *testing.T) {
	assert.Equal(t, RateWindow, config.MinRetentionPeriod)
	assert.Equal(t, RateWindow, IdleWindow(config.MinRetentionPeriod), "the shortest period's idle window is not widened")
}

// A variant's spec.scaleToZeroRetention has the ConfigMap's floor, and its
// ceiling is the longest idle window: the window counting requests always
// covers the retention (a longer one would be counted over less).
func TestVariantRetentionBounds(t *testing.T) {
	assert.Equal(t, config.MinRetentionPeriod, llmdv1alpha1.MinScaleToZeroRetention)
	assert.Equal(t, IdleWindows[len(IdleWindows)-1], llmdv1alpha1.MaxScaleToZeroRetention)
	assert.Equal(t, llmdv1alpha1.MaxScaleToZeroRetention, IdleWindow(llmdv1alpha1.MaxScaleToZeroRetention))
}
