// Package testenv is the home of kiln's test harnesses; nothing under it is
// product code, and the kiln binary imports none of it (TestProductImportsNoHarness).
//
//   - testcluster: real local control planes (etcd, kube-apiserver,
//     controller-manager, scheduler, kwok) and the real node;
//   - awsemu: the AWS emulator (one kumo process per region behind a router
//     that adds what kumo lacks); its child command, awsemu/kumoregion, is a
//     Go module of its own, so kumo is not in kiln's go.mod;
//   - faultproxy: the fault-injecting API proxy;
//   - testhooks: the crash and pause hooks the e2e tests drive.
//
// hack/cluster (make demo's local cluster) uses testcluster too: it is a
// developer tool, not part of the released binary.
package testenv
