package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// KwokVersion must match test/tools/build.sh.
const KwokVersion = "v0.8.0"

// KwokNodeLabel marks the fake nodes kwok manages.
const KwokNodeLabel = "type"

// KwokOptions configures fake nodes and pods.
type KwokOptions struct {
	// PodReadyDelay is how long a scheduled pod stays not Ready: it stands
	// for model load time.
	PodReadyDelay time.Duration
	// StartTimeout bounds waiting for kwok to manage a node (default 1m).
	StartTimeout time.Duration
}

// FakeNode describes a kwok node with GPUs.
type FakeNode struct {
	Name   string
	GPUs   int64
	Labels map[string]string
}

// KwokBinary finds kwok in the build cache (test/tools/build.sh installs it).
func KwokBinary() (string, error) {
	root, err := binCacheRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "kwok-"+KwokVersion, "kwok")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("kwok %s not found at %s: run test/tools/build.sh", KwokVersion, bin)
	}
	return bin, nil
}

// kwokStages returns kwok's own "fast" node and pod Stage YAMLs from the Go
// module cache, with a delay added to pod readiness.
func kwokStages(readyDelay time.Duration) ([]byte, error) {
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/kwok@"+KwokVersion).Output()
	if err != nil {
		return nil, fmt.Errorf("locating the kwok %s module: %w", KwokVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, fmt.Errorf("locating the kwok %s module: %s", KwokVersion, out)
	}
	var docs []string
	for _, dir := range []string{"kustomize/stage/node/fast", "kustomize/stage/pod/fast"} {
		files, err := filepath.Glob(filepath.Join(mod.Dir, dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			if filepath.Base(f) == "pod-ready.yaml" && readyDelay > 0 {
				var stage map[string]any
				if err := yaml.Unmarshal(data, &stage); err != nil {
					return nil, fmt.Errorf("%s: %w", f, err)
				}
				spec, _ := stage["spec"].(map[string]any)
				if spec == nil {
					return nil, fmt.Errorf("%s: no spec", f)
				}
				spec["delay"] = map[string]any{"durationMilliseconds": readyDelay.Milliseconds()}
				if data, err = yaml.Marshal(stage); err != nil {
					return nil, err
				}
			}
			docs = append(docs, string(data))
		}
	}
	if len(docs) == 0 {
		return nil, errors.New("no kwok stage files found")
	}
	return []byte(strings.Join(docs, "\n---\n")), nil
}

// StartKwok runs kwok against the cluster: it manages nodes labelled
// type=kwok and their pods (Running, then Ready after PodReadyDelay).
func (c *Cluster) StartKwok(ctx context.Context, opts KwokOptions) (*Component, error) {
	bin, err := KwokBinary()
	if err != nil {
		return nil, err
	}
	stages, err := kwokStages(opts.PodReadyDelay)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(cfg, stages, 0o600); err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig=" + c.KubeconfigPath, "--config=" + cfg, "--manage-all-nodes=false",
		"--manage-nodes-with-label-selector=" + KwokNodeLabel + "=kwok", "--cidr=10.100.0.0/16", "--node-ip=127.0.0.1"}
	proc, err := startProcess("kwok", c.Dir, bin, args)
	if err != nil {
		return nil, err
	}
	comp := &Component{Name: "kwok", LogPath: proc.logPath, proc: proc}
	c.mu.Lock()
	c.comps = append(c.comps, comp)
	c.mu.Unlock()
	c.opts.logf("harness: started kwok (pod ready delay %s)", opts.PodReadyDelay)
	return comp, nil
}

// StartKwokT is StartKwok for tests.
func (c *Cluster) StartKwokT(t testing.TB, opts KwokOptions) *Component {
	t.Helper()
	ctx, cancel := testContext(t)
	defer cancel()
	comp, err := c.StartKwok(ctx, opts)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	return comp
}

// CreateFakeNode creates a kwok-managed node with nvidia.com/gpu capacity
// and waits until kwok marks it Ready.
func (c *Cluster) CreateFakeNode(ctx context.Context, n FakeNode) error {
	labels := map[string]string{KwokNodeLabel: "kwok", "kubernetes.io/hostname": n.Name}
	for k, v := range n.Labels {
		labels[k] = v
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":      *resource.NewQuantity(n.GPUs, resource.DecimalSI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	cs := c.Clientset()
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	for {
		got, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil && nodeReady(got) {
			// The API server taints new nodes not-ready; the node lifecycle
			// controller, which the harness does not run, would lift it.
			return liftNotReadyTaint(ctx, cs, got)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready: %w", n.Name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// KwokToleration lets a pod schedule on the fake nodes.
var KwokToleration = corev1.Toleration{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func liftNotReadyTaint(ctx context.Context, cs kubernetes.Interface, n *corev1.Node) error {
	kept := n.Spec.Taints[:0]
	for _, t := range n.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady {
			kept = append(kept, t)
		}
	}
	n.Spec.Taints = kept
	if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("lifting the not-ready taint of %s: %w", n.Name, err)
	}
	return nil
}
