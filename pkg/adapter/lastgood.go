package adapter

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/wva-project/wva/pkg/config"
)

// lastGoodLabels mark the ConfigMaps wva writes (config.LastGoodConfigMapName,
// AnalyzerStateConfigMapName, OptInDecisionsConfigMapName) as its own.
var lastGoodLabels = map[string]string{"app.kubernetes.io/name": "wva", "app.kubernetes.io/managed-by": "wva"}

// configMapPersister keeps one wva-owned ConfigMap equal to data(). Only
// the leader runs it; every replica reads the ConfigMap back through its
// informer. It writes config.LastGoodConfigMapName (so a restarted or newly
// elected replica keeps the last valid version of a broken entry instead
// of falling back to built-in defaults) and OptInDecisionsConfigMapName.
type configMapPersister struct {
	kube      kubernetes.Interface
	namespace string
	name      string
	data      func() map[string]string
	lister    corelisters.ConfigMapLister
	// retry is how soon a failed write is tried again, and how often data
	// is checked without a notify.
	retry   time.Duration
	changed chan struct{}
}

// notify asks for a write check; it never blocks.
func (p *configMapPersister) notify() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

func (p *configMapPersister) run(ctx context.Context) {
	tick := time.NewTicker(p.retry)
	defer tick.Stop()
	for {
		if err := p.persist(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "persisting ConfigMap", "configmap", klog.KRef(p.namespace, p.name))
		}
		select {
		case <-ctx.Done():
			return
		case <-p.changed:
		case <-tick.C:
		}
	}
}

// persist writes data() when it differs from the cached ConfigMap: no API
// call while nothing changes.
func (p *configMapPersister) persist(ctx context.Context) error {
	err := syncConfigMap(ctx, p.kube, p.lister, p.namespace, p.name, p.data())
	if apierrors.IsConflict(err) {
		// The cache is behind; the informer's update triggers the next
		// check.
		return nil
	}
	return err
}

// syncConfigMap makes wva's own ConfigMap namespace/name hold want, with no
// API call while the cached copy (lister) already does; a conflict (the
// cache behind) is returned as it is. Only the leader calls it.
func syncConfigMap(ctx context.Context, kube kubernetes.Interface, lister corelisters.ConfigMapLister, namespace, name string, want map[string]string) error {
	cur, err := lister.ConfigMaps(namespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return writeConfigMap(ctx, kube, cur, namespace, name, want)
}

// writeConfigMap makes wva's own ConfigMap hold want, given its current
// copy (nil: none); it returns conflicts as they are.
func writeConfigMap(ctx context.Context, kube kubernetes.Interface, cur *corev1.ConfigMap, namespace, name string, want map[string]string) error {
	if cur == nil {
		if len(want) == 0 {
			return nil
		}
		_, err := kube.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: lastGoodLabels},
			Data:       want,
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // the informer brings it; the next check updates it
		}
		return err
	}
	if maps.Equal(cur.Data, want) && hasLabels(cur.Labels, lastGoodLabels) {
		return nil
	}
	next := cur.DeepCopy()
	next.Data = want
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	maps.Copy(next.Labels, lastGoodLabels)
	if _, err := kube.CoreV1().ConfigMaps(namespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return fmt.Errorf("updating ConfigMap %s/%s: %w", namespace, name, err)
	}
	return nil
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// invalidGauge is wva_config_entry_invalid: 1 while a ConfigMap entry is
// rejected, 0 once fixed (kept so alerts see it resolve), deleted when the
// entry or its ConfigMap goes away. Any namespace may create local
// ConfigMaps with keys of its choosing, so their series are bounded: a
// local ConfigMap's default entry has its own series, its other keys share
// key="(other)"; at most maxLocalConfigMapSeries local ConfigMaps have
// their own configmap label, the rest share configmap="(other)". A shared
// series is 1 when any of its entries is rejected.
type invalidGauge struct {
	mu  sync.Mutex
	vec *prometheus.GaugeVec
	// series are the label pairs last set; tracked the local ConfigMaps
	// with a configmap label of their own (kept while they have entries).
	series  map[[2]string]bool
	tracked map[string]bool
}

// otherLabel stands for the keys and ConfigMaps without a series of their
// own: neither a ConfigMap name nor a data key can contain parentheses.
const otherLabel = "(other)"

// maxLocalConfigMapSeries caps the namespace-local ConfigMaps with a
// configmap label of their own.
const maxLocalConfigMapSeries = 100

func newInvalidGauge(reg prometheus.Registerer) *invalidGauge {
	g := &invalidGauge{series: map[[2]string]bool{}, tracked: map[string]bool{},
		vec: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "wva_config_entry_invalid",
			Help: fmt.Sprintf("1 while the ConfigMap entry is rejected (its last valid version, else built-in defaults, applies); 0 once fixed; "+
				"no series once the entry is gone. Namespace-local ConfigMaps: keys other than default share key=%[1]q, "+
				"and past %[2]d ConfigMaps the rest share configmap=%[1]q.", otherLabel, maxLocalConfigMapSeries)},
			[]string{"configmap", "key"})}
	reg.MustRegister(g.vec)
	return g
}

// sync sets the gauge from the entries present and the rejected ones
// (config.Store's Entries and Invalid).
func (g *invalidGauge) sync(entries [][2]string, invalid []*config.EntryError) {
	g.mu.Lock()
	defer g.mu.Unlock()
	local := map[string]bool{}
	for _, e := range entries {
		if strings.Contains(e[0], "/") {
			local[e[0]] = true
		}
	}
	for cm := range g.tracked {
		if !local[cm] {
			delete(g.tracked, cm)
		}
	}
	names := make([]string, 0, len(local))
	for cm := range local {
		names = append(names, cm)
	}
	sort.Strings(names)
	for _, cm := range names {
		if len(g.tracked) < maxLocalConfigMapSeries {
			g.tracked[cm] = true
		}
	}
	now := map[[2]string]float64{}
	for _, e := range entries {
		l := g.labels(e[0], e[1])
		now[l] = max(now[l], 0)
	}
	for _, e := range invalid {
		now[g.labels(e.ConfigMap, e.Key)] = 1
	}
	for l := range g.series {
		if _, ok := now[l]; !ok {
			g.vec.DeleteLabelValues(l[0], l[1])
			delete(g.series, l)
		}
	}
	for l, v := range now {
		g.series[l] = true
		g.vec.WithLabelValues(l[0], l[1]).Set(v)
	}
}

// labels are an entry's series: a global ConfigMap's entries each have
// their own; a local ConfigMap's are bounded as invalidGauge says.
func (g *invalidGauge) labels(configMap, key string) [2]string {
	if !strings.Contains(configMap, "/") {
		return [2]string{configMap, key}
	}
	if !g.tracked[configMap] {
		configMap = otherLabel
	}
	if key != config.DefaultKey {
		key = otherLabel
	}
	return [2]string{configMap, key}
}
