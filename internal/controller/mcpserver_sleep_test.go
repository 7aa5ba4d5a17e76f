package controller

import (
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// Sleep and wake on a real API server, decided from the activity Lease with a
// fake clock. The test writes the Lease as a bridge replica does.

// activityLease reads the server's activity Lease.
func activityLeaseOf(s *mcpv1alpha1.MCPServer) (*coordinationv1.Lease, error) {
	var l coordinationv1.Lease
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name + mcpv1alpha1.ActivityLeaseSuffix}, &l)
	return &l, err
}

// bridgeSawActivity writes the Lease's renewTime as a bridge replica does
// when the server is used (and at once to wake it).
func bridgeSawActivity(s *mcpv1alpha1.MCPServer, at time.Time) {
	EventuallyWithOffset(1, func() error {
		l, err := activityLeaseOf(s)
		if err != nil {
			return err
		}
		patch := client.MergeFrom(l.DeepCopy())
		renew, holder := metav1.NewMicroTime(at), "bridge-0"
		l.Spec.RenewTime, l.Spec.HolderIdentity = &renew, &holder
		return k8sClient.Patch(ctx, l, patch)
	}).Should(Succeed())
}

// readyServing waits for the server's pod, runs it as a kubelet would and
// waits for Ready.
func readyServing(s *mcpv1alpha1.MCPServer, clk *clocktesting.FakeClock) *corev1.Pod {
	pod := onePod(s)
	kubeletRuns(pod, clk.Now())
	EventuallyWithOffset(1, condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
	return pod
}

// sleptAfterIdle runs a server with an idle minute until it falls asleep.
func sleptAfterIdle(s *mcpv1alpha1.MCPServer, clk *clocktesting.FakeClock) {
	readyServing(s, clk)
	clk.Step(61 * time.Second)
	poke(s)
	EventuallyWithOffset(1, condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping))
}

// wokenAfterSleep puts a server with an idle minute to sleep, wakes it as a
// bridge's call does a second later and waits for Waking: its new pod.
func wokenAfterSleep(s *mcpv1alpha1.MCPServer, clk *clocktesting.FakeClock) *corev1.Pod {
	GinkgoHelper()
	sleptAfterIdle(s, clk)
	clk.Step(time.Second)
	bridgeSawActivity(s, clk.Now())
	pod := onePod(s)
	Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonWaking))
	return pod
}

var _ = Describe("Sleeping servers", func() {
	env := withController()

	sleepy := func(name string, port int) *mcpv1alpha1.MCPServer {
		s := httpServer(env.ns, name, port)
		s.Spec.Workload.Idle = &metav1.Duration{Duration: time.Minute}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		return s
	}

	It("falls asleep after idle with its catalog kept, stays up while used, and wakes on newer activity", func() {
		s := sleepy("dozy", testpeers.NodeEverything(GinkgoT()).Port)
		readyServing(s, env.clk)
		l, err := activityLeaseOf(s)
		Expect(err).NotTo(HaveOccurred())
		Expect(metav1.IsControlledBy(l, get(s))).To(BeTrue())
		Expect(l.Labels).To(And(HaveKeyWithValue(mcpv1alpha1.ServerLabel, s.Name), HaveKeyWithValue("app.kubernetes.io/managed-by", "mcp-operator")))
		// The bridge paces its renewals by the idle time the Lease carries.
		Expect(l.Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(60)))
		published := get(s).Status

		// Used 40 s in: the idle minute starts over from there.
		env.clk.Step(40 * time.Second)
		bridgeSawActivity(s, env.clk.Now())
		env.clk.Step(30 * time.Second)
		poke(s)
		Consistently(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(2 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))

		env.clk.Step(31 * time.Second)
		poke(s)
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping))
		Eventually(func() []corev1.Pod { return serverPods(s) }).Should(BeEmpty())
		st := get(s).Status
		Expect(st.SleepingSince).NotTo(BeNil())
		Expect(st.SleepingSince.Time).To(BeTemporally("==", env.clk.Now()))
		Expect(condition(s, mcpv1alpha1.ConditionReady)().Message).To(ContainSubstring("the next call wakes it"))
		Expect(st.Tools).To(Equal(published.Tools))
		Expect(st.CatalogDigest).To(Equal(published.CatalogDigest))
		Expect(condition(s, mcpv1alpha1.ConditionCatalogReady)()).To(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
		Expect(st.Endpoint).To(BeNil())
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith(eventSlept, "no activity for 1m0s"))
		Expect(serverMetric("mcp_operator_server_sleeping", env.ns, s.Name)).To(HaveValue(BeEquivalentTo(1)))

		// Still asleep: a reconcile changes nothing.
		env.clk.Step(time.Hour)
		poke(s)
		Consistently(func() []corev1.Pod { return serverPods(s) }).WithTimeout(time.Second).Should(BeEmpty())

		// A call on a bridge: the Lease's renewTime moves past sleepingSince;
		// the watch on the Lease wakes the server, no poke needed.
		env.clk.Step(time.Second)
		bridgeSawActivity(s, env.clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonWaking))
		Expect(get(s).Status.SleepingSince).To(BeNil())
		Expect(get(s).Status.Tools).To(Equal(published.Tools), "the catalog stays listed while the server wakes")
		env.clk.Step(1500 * time.Millisecond)
		readyServing(s, env.clk)
		Expect(get(s).Status.Restarts.Total).To(BeZero(), "a wake is not a restart")
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith(eventWoke, "1.5s after the wake request"))
		Expect(serverMetric("mcp_operator_server_wakes_total", env.ns, s.Name)).To(HaveValue(BeEquivalentTo(1)))
		Expect(serverMetric("mcp_operator_server_sleeping", env.ns, s.Name)).To(HaveValue(BeZero()))
	})

	It("sleeps by hand, and a wake whose pod cannot start says WakeFailed with the reason", func() {
		s := sleepy("by-hand", testpeers.NodeEverything(GinkgoT()).Port)
		readyServing(s, env.clk)

		env.clk.Step(time.Second)
		update(s, func(cur *mcpv1alpha1.MCPServer) {
			cur.Annotations = map[string]string{mcpv1alpha1.SleepAnnotation: env.clk.Now().UTC().Format(time.RFC3339)}
		})
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping))
		Expect(condition(s, mcpv1alpha1.ConditionReady)().Message).To(ContainSubstring("put to sleep by hand"))
		Eventually(func() []corev1.Pod { return serverPods(s) }).Should(BeEmpty())

		env.clk.Step(time.Second)
		bridgeSawActivity(s, env.clk.Now())
		pod := onePod(s)
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonWaking))
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: serverContainer, Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "manifest unknown"}},
		}}}
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonImagePullFailed))
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith(eventWakeFailed, "ImagePullFailed: image \"example.com/everything:1\""))
	})

	It("treats a woken server whose catalog changed as a restart with a changed catalog: Locked refuses it", func() {
		node := testpeers.NodeEverything(GinkgoT())
		s := httpServer(env.ns, "changeling", node.Port)
		s.Spec.Workload.Idle = &metav1.Duration{Duration: time.Minute}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		readyServing(s, env.clk)
		approved := get(s).Status.CatalogDigest
		update(s, func(cur *mcpv1alpha1.MCPServer) {
			cur.Spec.Tools.CatalogPinning = mcpv1alpha1.CatalogPinningLocked
			cur.Spec.Tools.ApprovedDigest = approved
		})
		Eventually(func() int64 { cur := get(s); return cur.Generation - cur.Status.ObservedGeneration }).Should(BeZero())
		sleptAfterIdle(s, env.clk)

		// While it sleeps, another server (the go-sdk's everything-server,
		// another catalog) takes its place, as a new image would.
		node.Kill()
		bin, err := testpeers.EverythingServer()
		Expect(err).NotTo(HaveOccurred())
		testpeers.Start(GinkgoT(), node.Port, nil, bin, "-http=127.0.0.1:"+strconv.Itoa(node.Port))

		env.clk.Step(time.Second)
		bridgeSawActivity(s, env.clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonWaking))
		kubeletRuns(onePod(s), env.clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonCatalogNotApproved))
		Expect(get(s).Status.Tools).To(BeEmpty())
		Eventually(func() []string { return eventsOf(s) }).Should(And(
			eventWith("CatalogRefused", "approvedDigest"),
			eventWith(eventWakeFailed, "CatalogNotApproved")))
	})

	It("counts a crash on waking as a crash, and says WakeFailed", func() {
		s := sleepy("crash-on-wake", testpeers.NodeEverything(GinkgoT()).Port)
		sleptAfterIdle(s, env.clk)

		env.clk.Step(time.Second)
		bridgeSawActivity(s, env.clk.Now())
		kubeletSeesExit(onePod(s), 1, "Error")
		Eventually(func() int32 { return get(s).Status.Restarts.Consecutive }).Should(BeEquivalentTo(1))
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith(eventWakeFailed, "crashed: Error (exit code 1)"))
	})

	It("falls asleep again before a wake finished with Ready's time at the new sleep, and a newer call wakes it", func() {
		s := sleepy("restless", testpeers.NodeEverything(GinkgoT()).Port)
		wokenAfterSleep(s, env.clk)

		// The pod is slow to start; the server is put back to sleep meanwhile:
		// Ready stays False, yet it says when this sleep began, the time the
		// bridge judges its wake write against.
		env.clk.Step(10 * time.Second)
		update(s, func(cur *mcpv1alpha1.MCPServer) {
			cur.Annotations = map[string]string{mcpv1alpha1.SleepAnnotation: env.clk.Now().UTC().Format(time.RFC3339)}
		})
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping))
		since := get(s).Status.SleepingSince
		Expect(since).NotTo(BeNil())
		Expect(condition(s, mcpv1alpha1.ConditionReady)().LastTransitionTime.Time).To(BeTemporally("==", since.Time))
		Expect(condition(s, mcpv1alpha1.ConditionAvailable)().LastTransitionTime.Time).To(BeTemporally("==", since.Time))

		env.clk.Step(time.Second)
		bridgeSawActivity(s, env.clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonWaking))
		readyServing(s, env.clk)
	})

	It("keeps a waking pod slower than idle, and counts idle from when it is Ready", func() {
		s := sleepy("slow-waker", testpeers.NodeEverything(GinkgoT()).Port)
		pod := wokenAfterSleep(s, env.clk)

		// Two idle minutes pass while the pod starts: it is kept.
		env.clk.Step(2 * time.Minute)
		poke(s)
		Consistently(func() []corev1.Pod { return serverPods(s) }).WithTimeout(2 * time.Second).Should(HaveLen(1))
		Expect(serverPods(s)[0].UID).To(Equal(pod.UID))
		Expect(condition(s, mcpv1alpha1.ConditionReady)()).To(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonWaking))

		// Ready now; the call that woke it is over two minutes old, yet the
		// idle minute starts at Ready.
		kubeletRuns(pod, env.clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
		env.clk.Step(30 * time.Second)
		poke(s)
		Consistently(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(2 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
		env.clk.Step(31 * time.Second)
		poke(s)
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping))
	})

	It("sleeps by hand a server without idle, whose Lease the request creates", func() {
		s := httpServer(env.ns, "no-idle", testpeers.NodeEverything(GinkgoT()).Port)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		readyServing(s, env.clk)
		_, err := activityLeaseOf(s)
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Lease without idle or a sleep request")

		// The request is older than the reconcile that sees it.
		asked := env.clk.Now().Add(500 * time.Millisecond)
		env.clk.Step(2 * time.Second)
		update(s, func(cur *mcpv1alpha1.MCPServer) {
			cur.Annotations = map[string]string{mcpv1alpha1.SleepAnnotation: asked.UTC().Format(time.RFC3339Nano)}
		})
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping))
		Eventually(func() []corev1.Pod { return serverPods(s) }).Should(BeEmpty())
		l, err := activityLeaseOf(s)
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Spec.LeaseDurationSeconds).To(BeNil())

		env.clk.Step(time.Second)
		bridgeSawActivity(s, env.clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonWaking))
		readyServing(s, env.clk)
	})

	It("holds the Lease as it falls asleep, so that any later write wakes it, and stays awake when used meanwhile", func() {
		s := sleepy("held", testpeers.NodeEverything(GinkgoT()).Port)
		readyServing(s, env.clk)
		decidedOn := lastActivity(must(activityLeaseOf(s)))

		// A renewal the decision did not see (the cache lagging): not asleep.
		env.clk.Step(time.Second)
		bridgeSawActivity(s, env.clk.Now())
		r := &MCPServerReconciler{Client: k8sClient, APIReader: k8sClient}
		held, err := r.holdForSleep(ctx, get(s), decidedOn, metav1.NewTime(env.clk.Now()))
		Expect(err).NotTo(HaveOccurred())
		Expect(held).To(BeFalse())
		Expect(must(activityLeaseOf(s)).Spec.HolderIdentity).To(HaveValue(Equal("bridge-0")))

		env.clk.Step(61 * time.Second)
		poke(s)
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping))
		l := must(activityLeaseOf(s))
		Expect(l.Spec.HolderIdentity).To(HaveValue(Equal("mcp-operator")))
		Expect(l.Spec.RenewTime.Time).To(BeTemporally("==", get(s).Status.SleepingSince.Time))

		// Held for a sleep whose status write was lost (a conflict): the
		// next reconcile goes on with that sleep, from its time.
		env.clk.Step(time.Second)
		bridgeSawActivity(s, env.clk.Now())
		readyServing(s, env.clk)
		since := metav1.NewTime(env.clk.Now())
		env.clk.Step(time.Second)
		held, err = r.holdForSleep(ctx, get(s), lastActivity(must(activityLeaseOf(s))), since)
		Expect(err).NotTo(HaveOccurred())
		Expect(held).To(BeTrue())
		poke(s)
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping))
		Expect(get(s).Status.SleepingSince.Time).To(BeTemporally("==", since.Time))
		Eventually(func() []corev1.Pod { return serverPods(s) }).Should(BeEmpty())
		l = must(activityLeaseOf(s))

		// Any Lease someone else wrote reaches its server, whatever the
		// cached server says; the operator's own writes do not.
		Expect(r.wakeOnActivity(ctx, l)).To(BeEmpty())
		l.Spec.HolderIdentity = ptrTo("bridge-1")
		Expect(r.wakeOnActivity(ctx, l)).To(ConsistOf(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)}))
	})

	It("reports a Lease of the activity Lease's name that is not the server's as a conflict", func() {
		holder := "someone-else"
		foreign := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: env.ns, Name: "squatted" + mcpv1alpha1.ActivityLeaseSuffix},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
		}
		Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
		s := sleepy("squatted", testpeers.NodeEverything(GinkgoT()).Port)
		Eventually(condition(s, mcpv1alpha1.ConditionDegraded)).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonReconcileError))
		Expect(condition(s, mcpv1alpha1.ConditionDegraded)().Message).To(ContainSubstring("not this server's activity Lease"))
		Expect(must(activityLeaseOf(s)).Spec.HolderIdentity).To(HaveValue(Equal(holder)), "the other Lease is left as it was")
	})

	It("measures a wake from its first request, not from the renewals written while it starts", func() {
		s := sleepy("measured", testpeers.NodeEverything(GinkgoT()).Port)
		pod := wokenAfterSleep(s, env.clk)

		// Calls waiting for it keep the Lease renewed.
		env.clk.Step(5 * time.Second)
		bridgeSawActivity(s, env.clk.Now())
		poke(s)
		env.clk.Step(3 * time.Second)
		kubeletRuns(pod, env.clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
		// 8 s from the first request; 5 s when the reconcile that saw the
		// pod Ready had read the clock before the last step. Measured from
		// the renewal it would be 3 s (or 0 s).
		Eventually(func() []string { return eventsOf(s) }).Should(ContainElement(MatchRegexp(`^Woke: .*, [58]s after the wake request$`)))
	})

	It("carries a changed idle into the Lease's duration", func() {
		s := sleepy("retimed", testpeers.NodeEverything(GinkgoT()).Port)
		readyServing(s, env.clk)
		update(s, func(cur *mcpv1alpha1.MCPServer) {
			cur.Spec.Workload.Idle = &metav1.Duration{Duration: 90 * time.Second}
		})
		Eventually(func() *int32 { return must(activityLeaseOf(s)).Spec.LeaseDurationSeconds }).Should(HaveValue(BeEquivalentTo(90)))
	})

	It("puts a server without idle to sleep by hand, and starts one created with a sleep request asleep, with no pod", func() {
		// No idle: the Lease is created only once the request is there, after it.
		awake := httpServer(env.ns, "no-idle-by-hand", testpeers.NodeEverything(GinkgoT()).Port)
		Expect(k8sClient.Create(ctx, awake)).To(Succeed())
		readyServing(awake, env.clk)
		env.clk.Step(time.Second)
		update(awake, func(cur *mcpv1alpha1.MCPServer) {
			cur.Annotations = map[string]string{mcpv1alpha1.SleepAnnotation: env.clk.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)}
		})
		Eventually(condition(awake, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping))
		Eventually(func() []corev1.Pod { return serverPods(awake) }).Should(BeEmpty())

		// Created with the request: asleep before any pod. Within a second
		// (sleepingSince is whole seconds, the Lease's start is not): the
		// Lease starting just before the request is no wake.
		env.clk.Step(300 * time.Millisecond)
		born := httpServer(env.ns, "born-asleep", testpeers.NodeEverything(GinkgoT()).Port)
		born.Spec.Workload.Idle = &metav1.Duration{Duration: time.Hour}
		born.Annotations = map[string]string{mcpv1alpha1.SleepAnnotation: env.clk.Now().UTC().Format(time.RFC3339Nano)}
		Expect(k8sClient.Create(ctx, born)).To(Succeed())
		Eventually(condition(born, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping))
		Consistently(func() []corev1.Pod { return serverPods(born) }).WithTimeout(time.Second).Should(BeEmpty())
		// A call wakes it as any sleeping server.
		env.clk.Step(time.Second)
		bridgeSawActivity(born, env.clk.Now())
		readyServing(born, env.clk)
	})

	It("removes the Lease and runs the server again when idle is unset", func() {
		s := sleepy("insomniac", testpeers.NodeEverything(GinkgoT()).Port)
		sleptAfterIdle(s, env.clk)

		update(s, func(cur *mcpv1alpha1.MCPServer) { cur.Spec.Workload.Idle = nil })
		Eventually(func() bool {
			_, err := activityLeaseOf(s)
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
		Eventually(func() *metav1.Time { return get(s).Status.SleepingSince }).Should(BeNil())
		readyServing(s, env.clk)
		env.clk.Step(time.Hour)
		poke(s)
		Consistently(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(2 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
	})
})

var _ = Describe("decideSleep", func() {
	t0 := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	server := func(idle time.Duration, sleepingSince *time.Time) *mcpv1alpha1.MCPServer {
		s := &mcpv1alpha1.MCPServer{Spec: mcpv1alpha1.MCPServerSpec{Workload: &mcpv1alpha1.Workload{}}}
		if idle > 0 {
			s.Spec.Workload.Idle = &metav1.Duration{Duration: idle}
		}
		if sleepingSince != nil {
			mt := metav1.NewTime(*sleepingSince)
			s.Status.SleepingSince = &mt
		} else {
			s.Status.Conditions = []metav1.Condition{{Type: mcpv1alpha1.ConditionReady, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
		}
		return s
	}
	readyAt := func(s *mcpv1alpha1.MCPServer, status metav1.ConditionStatus, at time.Time) *mcpv1alpha1.MCPServer {
		s.Status.Conditions = []metav1.Condition{{Type: mcpv1alpha1.ConditionReady, Status: status, LastTransitionTime: metav1.NewTime(at)}}
		return s
	}
	DescribeTable("decides from the last activity, a sleep request and the time",
		func(s *mcpv1alpha1.MCPServer, activity, asked, now time.Time, want sleepDecision) {
			Expect(decideSleep(s, activity, asked, now)).To(Equal(want))
		},
		Entry("awake, idle not over: look again when it is", server(time.Minute, nil), t0, time.Time{}, t0.Add(20*time.Second), sleepDecision{action: stayAwake, after: 40 * time.Second}),
		Entry("awake, idle over", server(time.Minute, nil), t0, time.Time{}, t0.Add(time.Minute), sleepDecision{action: fallAsleep}),
		Entry("not Ready (waking, starting): idle does not count", readyAt(server(time.Minute, nil), metav1.ConditionFalse, t0), t0, time.Time{}, t0.Add(time.Hour), sleepDecision{action: stayAwake, after: time.Minute}),
		Entry("Ready after the last activity: idle counts from Ready", readyAt(server(time.Minute, nil), metav1.ConditionTrue, t0.Add(2*time.Minute)), t0, time.Time{}, t0.Add(150*time.Second), sleepDecision{action: stayAwake, after: 30 * time.Second}),
		Entry("asked to sleep after the last activity", server(0, nil), t0, t0.Add(time.Second), t0.Add(time.Second), sleepDecision{action: fallAsleep, byHand: true}),
		Entry("asked to sleep before the last activity (a call since)", server(0, nil), t0.Add(time.Second), t0, t0.Add(time.Second), sleepDecision{action: stayAwake}),
		Entry("asleep, no newer activity", server(time.Minute, ptrTo(t0)), t0, time.Time{}, t0.Add(time.Hour), sleepDecision{action: stayAsleep}),
		Entry("asleep, newer activity wakes it", server(time.Minute, ptrTo(t0)), t0.Add(time.Millisecond), time.Time{}, t0.Add(time.Hour), sleepDecision{action: wakeUp}),
		Entry("asleep by hand, activity within the second it fell asleep but before the request", server(0, ptrTo(t0)), t0.Add(300*time.Millisecond), t0.Add(500*time.Millisecond), t0.Add(time.Hour), sleepDecision{action: stayAsleep}),
		Entry("asleep by hand, activity after the request wakes it", server(0, ptrTo(t0)), t0.Add(600*time.Millisecond), t0.Add(500*time.Millisecond), t0.Add(time.Hour), sleepDecision{action: wakeUp}),
	)
	It("refuses a sleep request that is not an RFC 3339 time", func() {
		s := server(0, nil)
		s.Annotations = map[string]string{mcpv1alpha1.SleepAnnotation: "now"}
		_, err := sleepRequest(s)
		Expect(err).To(MatchError(ContainSubstring("not an RFC 3339 time")))
	})
})

func ptrTo[T any](t T) *T { return &t }

// must is v when err is nil, and fails the spec otherwise.
func must[T any](v T, err error) T {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	return v
}

var _ = Describe("the Lease cache", func() {
	It("holds servers' activity Leases, not the operator's other Leases", func() {
		sel := activityLeaseSelector()
		Expect(sel.Matches(labels.Set{"app.kubernetes.io/managed-by": "mcp-operator", mcpv1alpha1.ServerLabel: "fs"})).To(BeTrue())
		Expect(sel.Matches(labels.Set{"app.kubernetes.io/managed-by": "mcp-operator", "mcp-operator.dev/once": "allow"})).To(BeFalse())
		Expect(sel.Matches(labels.Set{mcpv1alpha1.ServerLabel: "fs"})).To(BeFalse())
	})
})
