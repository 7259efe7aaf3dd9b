// helm/lapse without a cluster: for the defaults and each option scenario
// (chart.js), `helm lint --strict` passes, every manifest `helm template`
// renders is valid against the Kubernetes 1.27 schemas (kubernetes-models,
// offline), and the objects keep the chart's promises: one replica, restricted
// pod security, numeric gRPC probes on the listen port, a grace longer than
// --shutdown_grace, Services named and typed for a mesh. Bad values are
// refused with a message that names them.
//
//   LAPSE_HELM=build/tools/bin/helm NODE_PATH=build/tools/node_modules \
//     node tests/packaging/chart_test.js
'use strict';

const assert = require('node:assert/strict');
const chart = require('./chart');

// The kubernetes-models class for a manifest's apiVersion and kind.
function modelOf(doc) {
  const group = doc.apiVersion.includes('/') ? doc.apiVersion : `core/${doc.apiVersion}`;
  const module = group.startsWith('core/') ? 'kubernetes-models/v1' : `kubernetes-models/${group}`;
  const Model = require(module)[doc.kind];
  assert.ok(Model, `no Kubernetes schema for ${doc.apiVersion} ${doc.kind}`);
  return Model;
}

// The "restricted" Pod Security Standard, plus a read-only root filesystem.
function checkRestricted(podSpec) {
  const pod = podSpec.securityContext || {};
  assert.ok(!podSpec.hostNetwork && !podSpec.hostPID && !podSpec.hostIPC, 'host namespaces');
  for (const volume of podSpec.volumes || []) {
    assert.ok(!volume.hostPath, `hostPath volume ${volume.name}`);
  }
  for (const container of podSpec.containers) {
    const own = container.securityContext || {};
    assert.equal(own.runAsNonRoot ?? pod.runAsNonRoot, true, 'runAsNonRoot');
    assert.notEqual(own.runAsUser ?? pod.runAsUser, 0, 'runAsUser 0');
    assert.equal(own.allowPrivilegeEscalation, false, 'allowPrivilegeEscalation');
    assert.equal(own.readOnlyRootFilesystem, true, 'readOnlyRootFilesystem');
    assert.ok(own.capabilities.drop.includes('ALL'), 'capabilities.drop ALL');
    assert.deepEqual(own.capabilities.add || [], [], 'capabilities.add');
    assert.equal((own.seccompProfile || pod.seccompProfile).type, 'RuntimeDefault', 'seccomp');
  }
}

function durationSeconds(text) {
  const match = /^(\d+)s$/.exec(text);
  assert.ok(match, `--shutdown_grace=${text}: expected whole seconds`);
  return Number(match[1]);
}

async function main() {
  for (const {name, values} of chart.scenarios) {
    await chart.check(`${name}: helm lint --strict`, () => {
      const lint = chart.runHelm(['lint', '--strict', chart.chartDir], values);
      assert.equal(lint.status, 0, lint.stdout + lint.stderr);
    });

    let docs = [];
    await chart.check(`${name}: helm template renders`, () => {
      docs = chart.render(values);
    });
    for (const doc of docs) {
      await chart.check(`${name}: ${doc.kind} ${doc.metadata.name} matches its schema`, () => {
        new (modelOf(doc))(doc).validate();
      });
    }
    if (docs.length === 0) continue;

    await chart.check(`${name}: one replica, restricted pod security`, () => {
      const statefulSet = chart.only(docs, 'StatefulSet');
      assert.equal(statefulSet.spec.replicas, 1);
      checkRestricted(statefulSet.spec.template.spec);
      assert.equal(statefulSet.spec.template.spec.automountServiceAccountToken, false);
    });

    await chart.check(`${name}: probes are gRPC on the listen port`, () => {
      const container = chart.lapsedContainer(docs);
      const listen = chart.flags(container.args).get('listen');
      const port = Number(listen.split(':').pop());
      for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
        assert.equal(container[probe].grpc.port, port, `${probe}.grpc.port vs --listen=${listen}`);
      }
      assert.deepEqual(container.ports, [{name: 'grpc', containerPort: port, protocol: 'TCP'}]);
    });

    await chart.check(`${name}: the pod outlives --shutdown_grace`, () => {
      const statefulSet = chart.only(docs, 'StatefulSet');
      const grace = durationSeconds(chart.flags(chart.lapsedContainer(docs).args).get('shutdown_grace'));
      assert.ok(statefulSet.spec.template.spec.terminationGracePeriodSeconds > grace);
    });

    await chart.check(`${name}: Services speak gRPC to the mesh`, () => {
      const statefulSet = chart.only(docs, 'StatefulSet');
      const services = docs.filter((doc) => doc.kind === 'Service');
      assert.equal(services.length, 2);
      const headless = services.find((service) => service.spec.clusterIP === 'None');
      assert.ok(headless, 'no headless Service');
      assert.equal(statefulSet.spec.serviceName, headless.metadata.name);
      for (const service of services) {
        assert.deepEqual(service.spec.selector, statefulSet.spec.selector.matchLabels);
        assert.equal(service.spec.ports.length, 1);
        const [port] = service.spec.ports;
        assert.equal(port.name, 'grpc');
        assert.equal(port.appProtocol, 'grpc');
        assert.equal(port.targetPort, 'grpc');
      }
    });

    await chart.check(`${name}: the data directory is the volume claim`, () => {
      const statefulSet = chart.only(docs, 'StatefulSet');
      const container = chart.lapsedContainer(docs);
      const dataDir = chart.flags(container.args).get('data_dir');
      if (values.persistence?.enabled === false) {
        assert.equal(dataDir, '');
        assert.equal(statefulSet.spec.volumeClaimTemplates, undefined);
        return;
      }
      const [claim] = statefulSet.spec.volumeClaimTemplates;
      const mount = container.volumeMounts.find((m) => m.name === claim.metadata.name);
      assert.equal(mount.mountPath, dataDir);
    });

    await chart.check(`${name}: policies select the pod`, () => {
      const labels = chart.only(docs, 'StatefulSet').spec.template.metadata.labels;
      for (const doc of docs) {
        const selector =
            doc.kind === 'PodDisruptionBudget' ? doc.spec.selector :
            doc.kind === 'NetworkPolicy'       ? doc.spec.podSelector :
                                                 null;
        if (!selector) continue;
        for (const [key, value] of Object.entries(selector.matchLabels)) {
          assert.equal(labels[key], value, `${doc.kind} selects ${key}=${value}`);
        }
      }
    });
  }

  const refused = [
    [{persistence: {fsync: 'sometimes'}}, /persistence\/fsync/],
    [{limits: {maxKeyBytes: 0}}, /limits\/maxKeyBytes/],
    [{replicas: 3}, /additional properties 'replicas' not allowed/],
    [{watch: {heartbeatInterval: '30 seconds'}}, /watch\/heartbeatInterval/],
    [{shutdownGraceSeconds: 30}, /terminationGracePeriodSeconds \(15\) must be longer than shutdownGraceSeconds \(30\)/],
    [{extraArgs: ['--listen=0.0.0.0:1']}, /extraArgs: --listen=0.0.0.0:1 is set by the chart/],
  ];
  for (const [values, message] of refused) {
    await chart.check(`refuses ${JSON.stringify(values)}`, () => {
      const result = chart.runHelm(['template', 'lapse', chart.chartDir], values);
      assert.notEqual(result.status, 0, 'helm template accepted it');
      assert.match(result.stderr, message);
    });
  }
  chart.finish();
}

main();
