package scalefromzero

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	wvafake "github.com/wva-project/wva/pkg/generated/clientset/versioned/fake"
)

// Where the InferencePool API is not served and no flag names the EPPs,
// they are found by the default pod selector, not refused: an upgrade of
// a cluster without InferencePools keeps waking its groups. A flag still
// wins.
func TestEndpointsWithoutInferencePools(t *testing.T) {
	cfg := &rest.Config{Host: "http://127.0.0.1:1"}
	for _, tt := range []struct {
		name     string
		selector string
		urls     []string
		want     any
	}{
		{"no flags: the default selector", "", nil, PodEndpoints{}},
		{"--epp-selector", "app=my-epp", nil, PodEndpoints{}},
		{"--epp-url", "", []string{"http://epp:9090/metrics"}, StaticEndpoints(nil)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			o.EPPSelector, o.EPPURLs = tt.selector, tt.urls
			w, err := newWatches(o, cfg, fake.NewClientset(), wvafake.NewSimpleClientset())
			require.NoError(t, err)
			assert.IsType(t, tt.want, w.endpoints)
		})
	}
}
