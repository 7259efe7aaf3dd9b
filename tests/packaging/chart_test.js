// helm/lapse without a cluster: for the defaults and each option scenario
// (chart.js), `helm lint --strict` passes, every manifest `helm template`
// renders is valid against the Kubernetes 1.27 schemas (kubernetes-models,
// offline; the ServiceMonitor, a CRD they lack, as far as its Kubernetes types
// and a hand check of its endpoints go), and the objects keep the chart's
// promises: one replica, restricted pod security, numeric gRPC probes on the
// listen port (with TLS, on the plaintext health port), TLS files from the
// Secret mounted read-only, a grace longer than --shutdown_grace, Services named and typed
// for a mesh, the metrics port in the pod, the Service and the NetworkPolicy,
// a ServiceMonitor that finds one Service, a dashboard Grafana's sidecar
// finds. Bad values are refused with a message that names them.
//
//   LAPSE_HELM=build/tools/bin/helm NODE_PATH=build/tools/node_modules \
//     node tests/packaging/chart_test.js
'use strict';

const assert = require('node:assert/strict');
const chart = require('./chart');
const {LabelSelector} = require('@kubernetes-models/apimachinery/apis/meta/v1/LabelSelector');
const {ObjectMeta} = require('@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta');

// What of a ServiceMonitor (monitoring.coreos.com/v1, a Prometheus Operator
// CRD that kubernetes-models does not carry) can be checked offline: its
// metadata and selector against the Kubernetes schemas of those types, and
// the shape of its endpoints as the CRD defines them.
function validateServiceMonitor(doc) {
  new ObjectMeta(doc.metadata).validate();
  new LabelSelector(doc.spec.selector).validate();
  assert.deepEqual(Object.keys(doc.spec).sort(), ['endpoints', 'namespaceSelector', 'selector']);
  assert.ok(Array.isArray(doc.spec.namespaceSelector.matchNames));
  const promDuration = /^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$/;
  for (const endpoint of doc.spec.endpoints) {
    assert.deepEqual(Object.keys(endpoint).sort(),
                     ['interval', 'path', 'port', 'scheme', 'scrapeTimeout']);
    assert.equal(typeof endpoint.port, 'string');
    assert.ok(['http', 'https'].includes(endpoint.scheme));
    assert.match(endpoint.interval, promDuration);
    assert.match(endpoint.scrapeTimeout, promDuration);
  }
}

// The kubernetes-models class for a manifest's apiVersion and kind.
function modelOf(doc) {
  if (doc.apiVersion === 'monitoring.coreos.com/v1' && doc.kind === 'ServiceMonitor') {
    return function ServiceMonitor(manifest) {
      this.validate = () => validateServiceMonitor(manifest);
    };
  }
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

// The one object of `kind` a values switch renders, or null (after checking
// that none was rendered) when the switch is off.
function switchedObject(docs, kind, enabled) {
  const found = docs.filter((doc) => doc.kind === kind);
  assert.equal(found.length, enabled ? 1 : 0, `${found.length} ${kind} objects rendered`);
  return enabled ? found[0] : null;
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

    const redisCluster = chart.isRedisCluster(values);
    await chart.check(`${name}: restricted pod security`, () => {
      const workload = chart.workload(docs);
      checkRestricted(workload.spec.template.spec);
      assert.equal(workload.spec.template.spec.automountServiceAccountToken, false);
    });

    if (!redisCluster) {
      await chart.check(`${name}: the embedded store runs as one StatefulSet replica`, () => {
        assert.equal(chart.only(docs, 'StatefulSet').spec.replicas, 1);
        const flags = chart.flags(chart.lapsedContainer(docs).args);
        assert.equal(flags.get('store'), undefined);
        assert.equal(flags.get('shards'), String(values.shards ?? 16));
        assert.equal(switchedObject(docs, 'HorizontalPodAutoscaler', false), null);
        const budget = docs.find((doc) => doc.kind === 'PodDisruptionBudget');
        if (budget) assert.equal(budget.spec.maxUnavailable, values.podDisruptionBudget?.maxUnavailable ?? 0);
      });
    } else {
      await chart.check(`${name}: redis-cluster runs a Deployment with no volume claim`, () => {
        const deployment = chart.only(docs, 'Deployment');
        assert.equal(docs.filter((doc) => doc.kind === 'StatefulSet').length, 0);
        assert.equal(docs.filter((doc) => doc.kind === 'PersistentVolumeClaim').length, 0);
        const pod = deployment.spec.template.spec;
        assert.equal((pod.volumes || []).filter((v) => !v.secret).length, 0, 'only Secret volumes');
        const mounts = chart.lapsedContainer(docs).volumeMounts || [];
        assert.ok(mounts.every((m) => m.readOnly === true), 'every mount is read-only');
        const replicas = values.autoscaling?.enabled ? undefined : (values.replicas ?? 2);
        assert.equal(deployment.spec.replicas, replicas);
        const budget = docs.find((doc) => doc.kind === 'PodDisruptionBudget');
        if (budget) assert.equal(budget.spec.maxUnavailable, values.podDisruptionBudget?.maxUnavailable ?? 1);
      });

      await chart.check(`${name}: lapsed is told the Redis Cluster's nodes and settings`, () => {
        const redis = values.store.redisCluster;
        const flags = chart.flags(chart.lapsedContainer(docs).args);
        assert.equal(flags.get('store'), 'redis-cluster');
        assert.equal(flags.get('data_dir'), '', 'the image\'s --data_dir is turned off');
        assert.equal(flags.get('redis_nodes'), redis.nodes.join(','));
        assert.equal(flags.get('redis_partitions'), String(redis.partitions ?? 64));
        assert.equal(flags.get('redis_wait_replicas'), String(redis.waitReplicas ?? 1));
        assert.equal(flags.get('redis_wait_timeout'), redis.waitTimeout ?? '1s');
        assert.equal(flags.get('redis_heartbeat_interval'), redis.heartbeatInterval ?? '1s');
        for (const embeddedOnly of ['fsync', 'wal_group_wait', 'snapshot_after_bytes', 'wal_segment_bytes', 'shards']) {
          assert.equal(flags.get(embeddedOnly), undefined, `--${embeddedOnly} in redis-cluster mode`);
        }
      });

      await chart.check(`${name}: --redis_password_file is the Secret's key, mounted read-only`, () => {
        const password = values.store.redisCluster.password;
        const container = chart.lapsedContainer(docs);
        const file = chart.flags(container.args).get('redis_password_file');
        const volumes = chart.workload(docs).spec.template.spec.volumes || [];
        if (!password?.existingSecret) {
          assert.equal(file, undefined);
          assert.equal(volumes.find((v) => v.name === 'redis-password'), undefined);
          return;
        }
        const volume = volumes.find((v) => v.secret?.secretName === password.existingSecret);
        assert.equal(volume.secret.defaultMode, 0o440);
        const mount = container.volumeMounts.find((m) => m.name === volume.name);
        assert.equal(mount.readOnly, true);
        assert.equal(file, `${mount.mountPath}/${password.key || 'password'}`);
      });

      await chart.check(`${name}: the HorizontalPodAutoscaler scales the Deployment`, () => {
        const autoscaler = switchedObject(docs, 'HorizontalPodAutoscaler', values.autoscaling?.enabled === true);
        if (!autoscaler) return;
        const deployment = chart.only(docs, 'Deployment');
        assert.equal(autoscaler.apiVersion, 'autoscaling/v2');
        assert.deepEqual(autoscaler.spec.scaleTargetRef,
                         {apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name});
        assert.equal(autoscaler.spec.minReplicas, values.autoscaling.minReplicas ?? 2);
        assert.equal(autoscaler.spec.maxReplicas, values.autoscaling.maxReplicas ?? 10);
        assert.deepEqual(autoscaler.spec.metrics, [{
          type: 'Resource',
          resource: {
            name: 'cpu',
            target: {type: 'Utilization', averageUtilization: values.autoscaling.targetCPUUtilizationPercentage ?? 70},
          },
        }]);
        assert.ok(chart.lapsedContainer(docs).resources.requests.cpu, 'CPU utilization needs a CPU request');
      });

      await chart.check(`${name}: a NetworkPolicy that denies egress still lets lapsed reach Redis`, () => {
        const policy = docs.find((doc) => doc.kind === 'NetworkPolicy');
        if (!policy || !values.networkPolicy?.denyEgress) return;
        const open = policy.spec.egress.flatMap((rule) => rule.to ? [] : rule.ports);
        for (const node of values.store.redisCluster.nodes) {
          const port = Number(node.split(':').pop());
          assert.ok(open.some((p) => p.port === port && p.protocol === 'TCP'), `port ${port} of ${node}`);
        }
        assert.ok(open.some((p) => p.port === 53 && p.protocol === 'UDP'), 'DNS');
      });
    }

    const tlsOn = values.tls?.enabled === true;
    await chart.check(`${name}: probes are gRPC on the listen port, or with TLS the plaintext health port`, () => {
      const container = chart.lapsedContainer(docs);
      const flags = chart.flags(container.args);
      const listen = flags.get('listen');
      const port = Number(listen.split(':').pop());
      assert.deepEqual(container.ports[0], {name: 'grpc', containerPort: port, protocol: 'TCP'});
      const health = flags.get('health_listen');
      assert.equal(health !== undefined, tlsOn, `--health_listen=${health}`);
      const probePort = tlsOn ? Number(health.split(':').pop()) : port;
      for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
        assert.equal(container[probe].grpc.port, probePort, `${probe}.grpc.port`);
      }
      if (tlsOn) {
        assert.equal(health, `0.0.0.0:${probePort}`);
        assert.deepEqual(container.ports.find((p) => p.name === 'health'),
                         {name: 'health', containerPort: probePort, protocol: 'TCP'});
      }
    });

    await chart.check(`${name}: TLS comes from the Secret, mounted read-only`, () => {
      const workload = chart.workload(docs);
      const container = chart.lapsedContainer(docs);
      const flags = chart.flags(container.args);
      const volumes = workload.spec.template.spec.volumes || [];
      if (!tlsOn) {
        for (const flag of ['tls_cert', 'tls_key', 'tls_client_ca']) assert.equal(flags.get(flag), undefined);
        assert.equal(volumes.find((v) => v.name === 'tls'), undefined);
        return;
      }
      const volume = volumes.find((v) => v.secret?.secretName === values.tls.secretName);
      assert.equal(volume.secret.defaultMode, 0o440);
      assert.equal(volume.secret.secretName, values.tls.secretName);
      const mount = container.volumeMounts.find((m) => m.name === volume.name);
      assert.equal(mount.readOnly, true);
      assert.equal(flags.get('tls_cert'), `${mount.mountPath}/tls.crt`);
      assert.equal(flags.get('tls_key'), `${mount.mountPath}/tls.key`);
      assert.equal(flags.get('tls_client_ca'),
                   values.tls.clientAuth ? `${mount.mountPath}/ca.crt` : undefined);
    });

    const metricsOn = values.metrics?.enabled !== false;
    await chart.check(`${name}: the metrics port is --metrics_listen's, in the pod and the Service`, () => {
      const container = chart.lapsedContainer(docs);
      const listen = chart.flags(container.args).get('metrics_listen');
      const service = docs.find((doc) => doc.kind === 'Service' && doc.spec.clusterIP !== 'None');
      if (!metricsOn) {
        assert.equal(listen, undefined);
        assert.equal(container.ports.length, 1);
        assert.equal(service.spec.ports.length, 1);
        return;
      }
      const port = Number(listen.split(':').pop());
      assert.equal(listen, `0.0.0.0:${port}`);
      assert.deepEqual(container.ports.filter((p) => p.name === 'metrics'),
                       [{name: 'metrics', containerPort: port, protocol: 'TCP'}]);
      assert.deepEqual(service.spec.ports.slice(1), [
        {name: 'metrics', port, targetPort: 'metrics', protocol: 'TCP', appProtocol: 'http'},
      ]);
      const policy = docs.find((doc) => doc.kind === 'NetworkPolicy');
      if (policy) {
        assert.ok(policy.spec.ingress.some((rule) => rule.ports.some((p) => p.port === port)),
                  'the NetworkPolicy opens the metrics port');
      }
    });

    await chart.check(`${name}: the ServiceMonitor scrapes the Service's metrics port`, () => {
      const monitor = switchedObject(docs, 'ServiceMonitor', values.metrics?.serviceMonitor?.enabled);
      if (!monitor) return;
      const services = docs.filter((doc) => doc.kind === 'Service');
      const selected = services.filter((service) => Object.entries(monitor.spec.selector.matchLabels)
          .every(([key, value]) => service.metadata.labels[key] === value));
      const scraped = selected.filter((service) => service.spec.ports.some((p) => p.name === 'metrics'));
      assert.equal(scraped.length, 1, 'exactly one selected Service has the metrics port');
      assert.deepEqual(monitor.spec.endpoints.map((e) => e.port), ['metrics']);
      assert.deepEqual(monitor.spec.namespaceSelector.matchNames, ['test']);
      for (const [key, value] of Object.entries(values.metrics.serviceMonitor.labels || {})) {
        assert.equal(monitor.metadata.labels[key], value);
      }
    });

    await chart.check(`${name}: the Grafana dashboard ConfigMap is discoverable and queries lapse_ metrics`, () => {
      const map = switchedObject(docs, 'ConfigMap', values.metrics?.dashboard?.enabled);
      if (!map) return;
      assert.equal(map.metadata.labels.grafana_dashboard, '1');
      const dashboard = JSON.parse(map.data['lapse.json']);
      assert.equal(dashboard.uid, 'lapse');
      assert.ok(dashboard.panels.length > 0);
      for (const panel of dashboard.panels) {
        assert.ok(panel.targets.length > 0, `panel ${panel.title} has no query`);
        for (const target of panel.targets) assert.match(target.expr, /\blapse_[a-z_]+/);
      }
      assert.ok(chart.dashboardMetricNames().size >= 10);
    });

    await chart.check(`${name}: the pod outlives --shutdown_grace`, () => {
      const workload = chart.workload(docs);
      const grace = durationSeconds(chart.flags(chart.lapsedContainer(docs).args).get('shutdown_grace'));
      assert.ok(workload.spec.template.spec.terminationGracePeriodSeconds > grace);
    });

    await chart.check(`${name}: Services speak gRPC to the mesh`, () => {
      const workload = chart.workload(docs);
      const services = docs.filter((doc) => doc.kind === 'Service');
      const headless = services.find((service) => service.spec.clusterIP === 'None');
      if (redisCluster) {
        assert.equal(services.length, 1, 'a Deployment needs no headless Service');
      } else {
        assert.equal(services.length, 2);
        assert.ok(headless, 'no headless Service');
        assert.equal(workload.spec.serviceName, headless.metadata.name);
        assert.equal(headless.spec.ports.length, 1, 'the headless Service has only the gRPC port');
      }
      for (const service of services) {
        assert.deepEqual(service.spec.selector, workload.spec.selector.matchLabels);
        const [port] = service.spec.ports;
        assert.equal(port.name, 'grpc');
        assert.equal(port.appProtocol, 'grpc');
        assert.equal(port.targetPort, 'grpc');
      }
    });

    await chart.check(`${name}: the data directory is the volume claim`, () => {
      const workload = chart.workload(docs);
      const container = chart.lapsedContainer(docs);
      const dataDir = chart.flags(container.args).get('data_dir');
      if (values.persistence?.enabled === false) {
        assert.equal(dataDir, '');
        assert.equal(workload.spec.volumeClaimTemplates, undefined);
        assert.equal((container.volumeMounts || []).find((m) => m.name === 'data'), undefined);
        return;
      }
      const [claim] = workload.spec.volumeClaimTemplates;
      const mount = container.volumeMounts.find((m) => m.name === claim.metadata.name);
      assert.equal(mount.mountPath, dataDir);
    });

    await chart.check(`${name}: --auth_file is the Secret's key, mounted read-only for lapsed only`, () => {
      const workload = chart.workload(docs);
      const container = chart.lapsedContainer(docs);
      const authFile = chart.flags(container.args).get('auth_file');
      const volumes = workload.spec.template.spec.volumes || [];
      if (!values.auth?.existingSecret) {
        assert.equal(authFile, undefined);
        assert.equal(volumes.find((v) => v.name === 'auth'), undefined);
        return;
      }
      const volume = volumes.find((v) => v.secret?.secretName === values.auth.existingSecret);
      assert.equal(volume.secret.secretName, values.auth.existingSecret);
      assert.equal(volume.secret.defaultMode, 0o440);
      const mount = container.volumeMounts.find((m) => m.name === volume.name);
      assert.equal(mount.readOnly, true);
      assert.equal(mount.subPath, undefined, 'a subPath mount would miss Secret updates');
      assert.equal(authFile, `${mount.mountPath}/${values.auth.key || 'auth'}`);
      assert.equal(workload.spec.template.spec.securityContext.fsGroup, 65532);
    });

    await chart.check(`${name}: --log_format is logFormat`, () => {
      const format = chart.flags(chart.lapsedContainer(docs).args).get('log_format');
      assert.equal(format, values.logFormat || 'text');
    });

    await chart.check(`${name}: policies select the pod`, () => {
      const labels = chart.workload(docs).spec.template.metadata.labels;
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
    [{replicas: 3}, /at '\/replicas': maximum: got 3, want 1/],
    [{autoscaling: {enabled: true}}, /at '\/autoscaling\/enabled': value must be false/],
    [{podDisruptionBudget: {maxUnavailable: 2}}, /at '\/podDisruptionBudget\/maxUnavailable': maximum: got 2, want 1/],
    [{store: {mode: 'redis'}}, /at '\/store\/mode'/],
    [{store: {mode: 'redis-cluster'}, persistence: {enabled: false}},
     /at '\/store\/redisCluster\/nodes': minItems: got 0, want 1/],
    [{store: {mode: 'redis-cluster', redisCluster: {nodes: ['redis:6379']}}},
     /at '\/persistence\/enabled': value must be false/],
    [{store: {mode: 'redis-cluster', redisCluster: {nodes: ['a:6379,b:6379']}}, persistence: {enabled: false}},
     /at '\/store\/redisCluster\/nodes\/0': 'a:6379,b:6379' does not match pattern/],
    [{store: {mode: 'redis-cluster', redisCluster: {nodes: ['redis']}}, persistence: {enabled: false}},
     /at '\/store\/redisCluster\/nodes\/0'/],
    [{store: {redisCluster: {password: {existingSecret: 'r', key: '../x'}}}}, /store\/redisCluster\/password\/key/],
    [{store: {redisCluster: {partitions: 20000}}}, /store\/redisCluster\/partitions/],
    [{store: {redisCluster: {waitReplicas: 101}}}, /store\/redisCluster\/waitReplicas/],
    [{store: {redisCluster: {waitTimeout: '1 second'}}}, /store\/redisCluster\/waitTimeout/],
    [{store: {mode: 'redis-cluster', redisCluster: {nodes: ['redis:6379']}}, persistence: {enabled: false},
      autoscaling: {enabled: true, minReplicas: 5, maxReplicas: 3}},
     /autoscaling.minReplicas \(5\) must not exceed autoscaling.maxReplicas \(3\)/],
    [{extraArgs: ['--redis_nodes=a:1']}, /extraArgs: --redis_nodes is set by the chart/],
    [{extraArgs: ['--store=redis-cluster']}, /extraArgs: --store is set by the chart/],
    [{extraArgs: ['--redis-wait-timeout=5s']}, /extraArgs: --redis_wait_timeout is set by the chart/],
    [{extraArgs: ['--data-dir=/tmp']}, /extraArgs: --data_dir is set by the chart/],
    [{watch: {stallTimeout: 'forever'}}, /watch\/stallTimeout/],
    [{groups: {maxConsumerGroups: 0}}, /groups\/maxConsumerGroups/],
    [{reservedFds: 8}, /reservedFds/],
    [{watch: {heartbeatInterval: '30 seconds'}}, /watch\/heartbeatInterval/],
    [{shutdownGraceSeconds: 30}, /terminationGracePeriodSeconds \(15\) must be longer than shutdownGraceSeconds \(30\)/],
    [{shutdownGraceSeconds: 4000, terminationGracePeriodSeconds: 5000}, /shutdownGraceSeconds/],
    [{extraArgs: ['--listen=0.0.0.0:1']}, /extraArgs: --listen is set by the chart/],
    [{extraArgs: ['--metrics_listen=0.0.0.0:1']}, /extraArgs: --metrics_listen is set by the chart/],
    [{metrics: {port: 50051}}, /metrics.port \(50051\) must differ from grpcPort/],
    [{metrics: {enabled: false, serviceMonitor: {enabled: true}}}, /metrics.serviceMonitor.enabled needs metrics.enabled/],
    [{metrics: {enabled: false, dashboard: {enabled: true}}}, /metrics.dashboard.enabled needs metrics.enabled/],
    [{metrics: {serviceMonitor: {interval: '30 seconds'}}}, /metrics\/serviceMonitor\/interval/],
    [{tls: {enabled: true}}, /tls.enabled needs tls.secretName/],
    [{tls: {enabled: true, secretName: 's', healthPort: 9090}}, /tls.healthPort \(9090\) must differ/],
    [{tls: {refreshInterval: '2h'}}, /tls\/refreshInterval/],
    [{extraArgs: ['--tls_cert=/x']}, /extraArgs: --tls_cert is set by the chart/],
    [{logFormat: 'yaml'}, /logFormat/],
    [{auth: {existingSecret: 'grants', key: '../etc/passwd'}}, /auth\/key/],
    [{extraArgs: ['--auth_file=/tmp/a']}, /extraArgs: --auth_file is set by the chart/],
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
