/*
Copyright The WVA Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package generated_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned/fake"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned/scheme"
	"github.com/wva-project/wva/pkg/generated/informers/externalversions"
	listersv1alpha1 "github.com/wva-project/wva/pkg/generated/listers/llmd/v1alpha1"
)

// The fake clientset is a drop-in for the real one.
var (
	_ versioned.Interface = (*versioned.Clientset)(nil)
	_ versioned.Interface = (*fake.Clientset)(nil)
)

func newVA(namespace, name string) *llmdv1alpha1.VariantAutoscaling {
	minReplicas := int32(0)
	return &llmdv1alpha1.VariantAutoscaling{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: llmdv1alpha1.VariantAutoscalingSpec{
			ScaleTargetRef: llmdv1alpha1.CrossVersionObjectReference{
				Kind: llmdv1alpha1.ScaleTargetKindDeployment,
				Name: name,
			},
			ModelID:     "meta/llama-3.1-8b",
			MinReplicas: &minReplicas,
			MaxReplicas: 4,
		},
	}
}

func TestSchemeKnowsVariantAutoscaling(t *testing.T) {
	for obj, want := range map[runtime.Object]string{
		&llmdv1alpha1.VariantAutoscaling{}:     llmdv1alpha1.VariantAutoscalingKind,
		&llmdv1alpha1.VariantAutoscalingList{}: llmdv1alpha1.VariantAutoscalingListKind,
	} {
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil {
			t.Fatalf("ObjectKinds(%T): %v", obj, err)
		}
		if len(gvks) != 1 || gvks[0] != llmdv1alpha1.SchemeGroupVersion.WithKind(want) {
			t.Fatalf("ObjectKinds(%T) = %v, want %s", obj, gvks, llmdv1alpha1.SchemeGroupVersion.WithKind(want))
		}
	}
}

func TestFakeClientsetCreateGetUpdateStatus(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewSimpleClientset()
	vas := cs.LlmdV1alpha1().VariantAutoscalings("ns")

	if _, err := vas.Create(ctx, newVA("ns", "a"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := vas.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Spec.ModelID != "meta/llama-3.1-8b" || got.Spec.MaxReplicas != 4 {
		t.Fatalf("Get returned %+v", got.Spec)
	}

	got.Status.DesiredOptimizedAlloc.NumReplicas = 3
	if _, err := vas.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	list, err := vas.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Status.DesiredOptimizedAlloc.NumReplicas != 3 {
		t.Fatalf("List returned %+v", list.Items)
	}

	// Namespaced: another namespace does not see it.
	if _, err := cs.LlmdV1alpha1().VariantAutoscalings("other").Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Get in another namespace: want NotFound, got %v", err)
	}

	if err := vas.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := vas.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Get after Delete: want NotFound, got %v", err)
	}
}

func TestInformerAndLister(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cs := fake.NewSimpleClientset(newVA("ns", "before-start"))
	// The fake tracker's watch has no resource versions: an object created
	// after the informer's List but before its Watch would be missed. Open
	// the watch here and note when it is in place, before creating more
	// objects.
	watching := make(chan struct{})
	var once sync.Once
	cs.PrependWatchReactor("variantautoscalings", func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := cs.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		once.Do(func() { close(watching) })
		return true, w, nil
	})

	factory := externalversions.NewSharedInformerFactory(cs, 0)
	vaInformer := factory.Llmd().V1alpha1().VariantAutoscalings()
	informer := vaInformer.Informer() // registers the informer before Start
	var lister listersv1alpha1.VariantAutoscalingLister = vaInformer.Lister()

	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop when ctx is done.
	defer func() { cancel(); factory.Shutdown() }()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("cache of %v did not sync", typ)
		}
	}
	if !informer.HasSynced() {
		t.Fatal("informer not synced")
	}

	if got, err := lister.VariantAutoscalings("ns").Get("before-start"); err != nil || got.Spec.ModelID != "meta/llama-3.1-8b" {
		t.Fatalf("lister Get(before-start) = %v, %v", got, err)
	}

	select {
	case <-watching:
	case <-ctx.Done():
		t.Fatal("informer never started watching")
	}
	if _, err := cs.LlmdV1alpha1().VariantAutoscalings("ns").Create(ctx, newVA("ns", "after-start"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		_, err := lister.VariantAutoscalings("ns").Get("after-start")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("informer never saw after-start: %v", err)
	}

	all, err := lister.List(labels.Everything())
	if err != nil || len(all) != 2 {
		t.Fatalf("lister List = %d objects, %v; want 2", len(all), err)
	}
	if _, err := lister.VariantAutoscalings("other").Get("after-start"); !apierrors.IsNotFound(err) {
		t.Fatalf("lister Get in another namespace: want NotFound, got %v", err)
	}
}

// The real clientset talks to the API server at the resource path of the
// CRD (group llmd.ai, version v1alpha1, plural variantautoscalings) and
// decodes the answer into the Go type.
func TestRealClientsetRequestPath(t *testing.T) {
	const wantPath = "/apis/llmd.ai/v1alpha1/namespaces/ns/variantautoscalings/a"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != wantPath {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		va := newVA("ns", "a")
		va.APIVersion = llmdv1alpha1.SchemeGroupVersion.String()
		va.Kind = llmdv1alpha1.VariantAutoscalingKind
		va.Status.CurrentReplicas = 2
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(va)
	}))
	defer srv.Close()

	cs, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	got, err := cs.LlmdV1alpha1().VariantAutoscalings("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Name != "a" || got.Spec.ModelID != "meta/llama-3.1-8b" || got.Status.CurrentReplicas != 2 {
		t.Fatalf("Get returned %+v", got)
	}
}
