// What the Helm chart tests share: the chart's option scenarios, rendering
// helm/lapse with helm, reading the rendered manifests, and a small check
// runner that ends with "N passed, N failed" and the exit status.
//
//   const chart = require('./chart');
//   for (const scenario of chart.scenarios) {
//     const docs = chart.render(scenario.values);  // throws on helm's error
//     chart.check(`${scenario.name}: ...`, () => { ... });
//   }
//   chart.finish();
//
// Helm is $LAPSE_HELM (scripts/dev.sh installs the pinned Helm 4 into
// build/tools/bin); `yaml` and `kubernetes-models` come from $NODE_PATH
// (build/tools/node_modules, pinned by package-lock.json beside this file).
'use strict';

const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const YAML = require('yaml');

const chartDir = path.resolve(__dirname, '../../helm/lapse');
const helm = process.env.LAPSE_HELM;
if (!helm || !fs.existsSync(helm)) {
  console.error(
    `chart tests: no helm at LAPSE_HELM=${helm}; bash scripts/dev.sh test installs it into build/tools`);
  process.exit(1);
}

// The option switches of values.yaml, each rendered, linted and validated.
const scenarios = [
  {name: 'defaults', values: {}},
  {name: 'memory-only', values: {persistence: {enabled: false}}},
  {name: 'metrics-off', values: {metrics: {enabled: false}}},
  {name: 'tls', values: {tls: {enabled: true, secretName: 'lapse-tls'}}},
  {
    name: 'mtls',
    values: {tls: {enabled: true, secretName: 'lapse-tls', clientAuth: true, refreshInterval: '30s', healthPort: 8086}},
  },
  {name: 'auth-and-json-logs', values: {auth: {existingSecret: 'lapse-grants'}, logFormat: 'json'}},
  {
    name: 'monitoring',
    values: {
      metrics: {
        port: 9100,
        ingressFrom: [{namespaceSelector: {matchLabels: {'kubernetes.io/metadata.name': 'monitoring'}}}],
        serviceMonitor: {enabled: true, interval: '15s', scrapeTimeout: '5s', labels: {release: 'kps'}},
        dashboard: {enabled: true, labels: {team: 'storage'}, annotations: {grafana_folder: 'Databases'}},
      },
    },
  },
  {
    name: 'no-policies',
    values: {networkPolicy: {enabled: false}, podDisruptionBudget: {enabled: false}},
  },
  {
    name: 'narrow-network-policy',
    values: {
      networkPolicy: {
        ingressFrom: [{podSelector: {matchLabels: {'lapse-client': 'true'}}}],
        extraIngress: [{ports: [{port: 15090, protocol: 'TCP'}]}],
        denyEgress: true,
      },
    },
  },
  {
    name: 'egress-allowed-to-mesh',
    values: {
      networkPolicy: {
        denyEgress: true,
        extraEgress: [{
          to: [{namespaceSelector: {matchLabels: {'kubernetes.io/metadata.name': 'istio-system'}}}],
        }],
      },
    },
  },
  {
    name: 'redis-cluster',
    values: {
      store: {mode: 'redis-cluster', redisCluster: {nodes: ['redis-0.redis:6379']}},
      persistence: {enabled: false},
    },
  },
  {
    name: 'redis-cluster-autoscaled-tls-auth',
    values: {
      store: {
        mode: 'redis-cluster',
        redisCluster: {
          nodes: ['redis-0.redis.data:6379', 'redis-1.redis.data:6379', '10.1.2.3:7000'],
          password: {existingSecret: 'redis-auth', key: 'redis-password'},
          partitions: 256,
          waitReplicas: 2,
          waitTimeout: '500ms',
          heartbeatInterval: '2s',
        },
      },
      persistence: {enabled: false},
      autoscaling: {enabled: true, minReplicas: 3, maxReplicas: 12, targetCPUUtilizationPercentage: 60},
      tls: {enabled: true, secretName: 'lapse-tls', clientAuth: true},
      auth: {existingSecret: 'lapse-grants'},
      metrics: {serviceMonitor: {enabled: true}},
      podDisruptionBudget: {maxUnavailable: 2},
      networkPolicy: {denyEgress: true},
    },
  },
  {
    name: 'redis-cluster-fixed-replicas',
    values: {
      store: {mode: 'redis-cluster', redisCluster: {nodes: ['10.0.0.5:6379', '10.0.0.6:6379']}},
      persistence: {enabled: false},
      replicas: 5,
      groups: {maxConsumerGroups: 10, maxVisibilityTimeout: '1h'},
      watch: {maxStreams: 500, pinnedBytes: 1048576, stallTimeout: '10s'},
    },
  },
  {
    name: 'everything-set',
    values: {
      fullnameOverride: 'store',
      image: {repository: 'registry.example/lapse', tag: 'v9', pullPolicy: 'Always'},
      imagePullSecrets: [{name: 'pull'}],
      grpcPort: 7000,
      metrics: {
        port: 7001,
        serviceMonitor: {enabled: true, interval: '1m'},
        dashboard: {enabled: true},
      },
      service: {type: 'LoadBalancer', port: 443, annotations: {'a.example/b': 'c'}},
      logLevel: 'warning',
      logFormat: 'json',
      auth: {existingSecret: 'grants', key: 'lapse.auth'},
      tls: {enabled: true, secretName: 'store-tls', clientAuth: true},
      shards: 4,
      shutdownGraceSeconds: 20,
      terminationGracePeriodSeconds: 40,
      persistence: {
        size: '1Gi',
        storageClassName: 'fast',
        accessModes: ['ReadWriteOncePod'],
        annotations: {'a.example/keep': 'yes'},
        fsync: 'always',
        snapshotAfterBytes: 0,
        walSegmentBytes: 4096,
        walGroupWait: '2ms',
      },
      retention: {events: 5000, bytes: 1048576},
      watch: {
        heartbeatInterval: '1m30s',
        batchMaxEvents: 10,
        batchMaxBytes: 4096,
        maxStreams: 20,
        pinnedBytes: 65536,
        stallTimeout: '5s',
      },
      limits: {
        maxMessageBytes: 4194304,
        maxCollectionNameBytes: 64,
        maxKeyBytes: 128,
        maxValueBytes: 2048,
        maxMembersPerRequest: 50,
        defaultPageSize: 10,
        maxPageSize: 20,
        maxTtl: '720h',
        maxTotalMembers: 1000,
        maxWatchCollections: 5,
        maxConcurrentStreams: 100,
      },
      groups: {
        maxConsumerGroups: 3,
        maxConsumersPerGroup: 4,
        maxGroupPending: 500,
        maxGroupDeadLetters: 0,
        maxGroupBytes: 65536,
        maxUnackedPerConsumer: 50,
        maxDeliveries: 5,
        maxVisibilityTimeout: '10m',
        maxPollEvents: 100,
        maxWaitingPolls: 10,
        maxConsumeStreams: 10,
      },
      reservedFds: 128,
      replicas: 1,
      extraArgs: ['--wal_truncate_damaged=false'],
      probes: {startup: {periodSeconds: 1, failureThreshold: 30, timeoutSeconds: 1}},
      resources: {requests: {cpu: '100m', memory: '128Mi'}, limits: {cpu: '1', memory: '256Mi'}},
      podDisruptionBudget: {maxUnavailable: 1},
      podAnnotations: {'linkerd.io/inject': 'enabled'},
      podLabels: {team: 'orders'},
      nodeSelector: {'kubernetes.io/os': 'linux'},
      tolerations: [{key: 'dedicated', operator: 'Equal', value: 'lapse', effect: 'NoSchedule'}],
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{matchExpressions: [{key: 'disk', operator: 'In', values: ['ssd']}]}],
          },
        },
      },
      priorityClassName: 'high',
    },
  },
];

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'lapse-chart-test-'));
process.on('exit', () => fs.rmSync(scratch, {recursive: true, force: true}));
let valuesFiles = 0;

// Runs helm with `values` as a values file; {status, stdout, stderr}.
function runHelm(args, values) {
  const file = path.join(scratch, `values-${valuesFiles++}.json`);
  fs.writeFileSync(file, JSON.stringify(values));  // JSON: YAML that reads the same in YAML 1.1
  return childProcess.spawnSync(helm, [...args, '--values', file], {encoding: 'utf8'});
}

// The manifests `helm template` renders for `values`, as objects.
function render(values) {
  const result = runHelm(['template', 'lapse', chartDir, '--namespace', 'test'], values);
  if (result.status !== 0) throw new Error(`helm template failed: ${result.stderr}`);
  return YAML.parseAllDocuments(result.stdout).map((doc) => doc.toJS()).filter((doc) => doc);
}

function only(docs, kind) {
  const found = docs.filter((doc) => doc.kind === kind);
  assert.equal(found.length, 1, `${found.length} ${kind} objects rendered, expected one`);
  return found[0];
}

// The metric names (samples, e.g. lapse_rpc_duration_seconds_count) the
// chart's Grafana dashboard queries.
function dashboardMetricNames() {
  const dashboard = JSON.parse(fs.readFileSync(path.join(chartDir, 'dashboards/lapse.json'), 'utf8'));
  const names = new Set();
  for (const panel of dashboard.panels) {
    for (const target of panel.targets) {
      for (const name of target.expr.match(/\blapse_[a-z_]+/g)) names.add(name);
    }
  }
  return names;
}

// Whether `values` select the Redis Cluster store.
function isRedisCluster(values) {
  return values.store?.mode === 'redis-cluster';
}

// The object that runs lapsed: the StatefulSet (embedded store) or the
// Deployment (redis-cluster), exactly one of the two.
function workload(docs) {
  const found = docs.filter((doc) => doc.kind === 'StatefulSet' || doc.kind === 'Deployment');
  assert.equal(found.length, 1, `${found.map((doc) => doc.kind)} rendered, expected one workload`);
  return found[0];
}

// The workload's lapsed container.
function lapsedContainer(docs) {
  const containers = workload(docs).spec.template.spec.containers;
  assert.equal(containers.length, 1);
  return containers[0];
}

// A "--flag-name=value" argument's flag name as lapsed reads it: flag_name.
function flagName(arg) {
  const match = /^--([^=]+)=/.exec(arg);
  assert.ok(match, `${arg}: not --flag=value`);
  return match[1].replace(/-/g, '_');
}

// "--name=value" flags of `args` as a Map (a repeated flag: the last wins,
// as in lapsed).
function flags(args) {
  return new Map(args.map((arg) => [flagName(arg), arg.slice(arg.indexOf('=') + 1)]));
}

let passed = 0;
let failed = 0;

// Runs one named check; a thrown error fails it and the run goes on.
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (error) {
    failed++;
    console.log(`FAIL ${name}\n     ${String(error.stack || error).replace(/\n/g, '\n     ')}`);
  }
}

function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 && passed > 0 ? 0 : 1;
}

module.exports = {
  chartDir,
  check,
  dashboardMetricNames,
  finish,
  flagName,
  flags,
  isRedisCluster,
  lapsedContainer,
  only,
  render,
  runHelm,
  scenarios,
  scratch,
  workload,
};
