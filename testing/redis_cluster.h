// RedisCluster: a Redis Cluster of Debian's redis-server on loopback, for
// tests of the Redis Cluster store — 3 masters and 3 replicas, AOF on, a
// short cluster-node-timeout so a failover takes about two seconds.
//
//   lapse::testing::RedisCluster cluster;
//   ASSERT_TRUE(cluster.status().ok()) << cluster.status();
//   RouterOptions options{.seeds = cluster.seeds()};
//   ...
//   cluster.Kill(cluster.MasterPorts()[0]);  // SIGKILL; a replica takes over
//   ASSERT_TRUE(cluster.WaitForClusterOk());
//   ASSERT_TRUE(cluster.Restart(port).ok());  // back, as a replica of the new master
//   ASSERT_TRUE(cluster.WaitForReplicasLinked());
//
// Redis cannot bind port 0 and report the port it got, so each node gets a
// random port below the kernel's ephemeral range (its cluster bus port, port +
// 10000, too: both stay clear of the range where client sockets and port-0
// servers live), and a node that finds its ports taken is started again on
// others. Readiness is polled, with patience: the node's log says it accepts
// connections, then CLUSTER INFO says cluster_state:ok on every node and
// every replica's link to its master is up. The destructor stops every node
// by its PID and removes the nodes' directory.
//
// The nodes listen on 127.0.0.1 and, where the host has it, on ::1 (an IPv6
// seed reaches them). They announce 127.0.0.1 to each other, in the slot map
// and in MOVED and ASK redirects; with RedisClusterOptions::ipv6, ::1.
//
// With a password, every node requires it (requirepass) and replicas give it
// to their masters (masterauth); Command() authenticates with it.
//
// Thread-compatible; the nodes are child processes of the test.
#ifndef LAPSE_TESTING_REDIS_CLUSTER_H_
#define LAPSE_TESTING_REDIS_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "testing/child_process.h"
#include "testing/temp_dir.h"

namespace lapse::testing {

struct RedisClusterOptions {
  // Empty: no authentication.
  std::string password;
  // The nodes meet and announce themselves on ::1, and seeds() are
  // "::1:PORT". status() is FAILED_PRECONDITION where the host has no ::1.
  bool ipv6 = false;
};

class RedisCluster final {
 public:
  static constexpr int kMasters = 3;
  static constexpr int kNodes = 2 * kMasters;
  static constexpr int kNodeTimeoutMs = 1000;

  // Starts the nodes and creates the cluster; status() says whether it worked.
  RedisCluster() : RedisCluster(RedisClusterOptions{}) {}
  explicit RedisCluster(RedisClusterOptions options);
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  const absl::Status& status() const { return status_; }

  // "127.0.0.1:PORT" (with ipv6: "::1:PORT") of every node, killed ones
  // included.
  std::vector<std::string> seeds() const;
  // The ports of the nodes that serve slots now, as CLUSTER SLOTS on a live
  // node says, in slot order.
  std::vector<int> MasterPorts() const;
  // The process ids of the live nodes, for a crash handler that must stop
  // them without running destructors.
  std::vector<pid_t> NodePids() const;

  // Runs one command on the node at `port` (a fresh connection) and returns
  // its reply as text: a string, an integer in decimal, an error as
  // "ERR ...", an array as its elements joined by '\n'.
  absl::StatusOr<std::string> Command(int port, const std::vector<std::string>& args) const;
  // Sets the password of the node at `port` to `password` (requirepass), as
  // an operator rotating it would, and closes the clients' connections
  // authenticated with the old one (not the replication links): they must
  // authenticate again. Command() keeps the old password, so call it last.
  absl::Status ChangePassword(int port, const std::string& password) const;
  // FLUSHALL on every master: the cluster holds no key after it.
  absl::Status FlushAll() const;
  // Runs one command on the master that serves `key`'s slot (each master in
  // turn until one answers other than MOVED); its reply as Command's.
  absl::StatusOr<std::string> CommandOnOwner(absl::string_view key,
                                             const std::vector<std::string>& args) const;

  // The port of the master that serves `key`'s slot (the one that does not
  // redirect it), 0 if none answers.
  int MasterOf(const std::string& key) const;
  // The port of a master other than the one at `port`, 0 if there is none.
  int AnotherMaster(int port) const;
  // The port of a replica of the master at `master_port`, 0 if it has none.
  int ReplicaOf(int master_port) const;

  // SIGKILLs the node at `port`.
  void Kill(int port);
  // Sends `signal_number` to the node at `port`: SIGSTOP freezes it (its
  // master's WAIT stops counting it), SIGCONT lets it go on.
  void Signal(int port, int signal_number);
  // Starts the killed node at `port` again, on its port and with its files
  // (nodes.conf, AOF), as a supervisor restarts a crashed process: it rejoins
  // the cluster, as a replica of whoever took its slots over.
  absl::Status Restart(int port);
  // Waits until every live node says cluster_state:ok, sees as many masters
  // serving slots as there were at the start, and sees only live nodes
  // serving them (after a Kill: the killed master's replica promoted); false
  // after patience.
  bool WaitForClusterOk() const;
  // Waits until every live master has a replica linked to it and every live
  // replica's link to its master is up; false after patience.
  bool WaitForReplicasLinked() const;

  // Moves `slot` from the master serving it to the master at `target_port`,
  // the way `redis-cli --cluster reshard` does while clients keep working:
  // CLUSTER SETSLOT IMPORTING on the target and MIGRATING on the source,
  // MIGRATE of its keys one at a time — `first` (those that exist) first, in
  // that order, then the rest — after each of which `moved(keys moved so
  // far)` runs, so a test can act while the slot's keys are split between the
  // two; then CLUSTER SETSLOT NODE on every master.
  absl::Status MigrateSlot(int slot, int target_port, absl::FunctionRef<void(int)> moved,
                           absl::Span<const std::string> first = {});
  // Splits a slot the way a test of a resharding needs: moves the slot of
  // the keys `first` (one slot; each must exist) to another master with
  // MigrateSlot, `first` first. Once they have moved, and not the rest, runs
  // `during`, which starts a call on the slot, and waits until a node
  // answers TRYAGAIN (the call finds its keys split). FAILED_PRECONDITION,
  // after the move, when none did.
  absl::Status MoveSlotSplitAfter(absl::Span<const std::string> first,
                                  absl::FunctionRef<void()> during);
  // How many error replies whose first word is `code` ("TRYAGAIN", "ASK")
  // the live nodes have given, added up (INFO errorstats).
  int64_t ErrorReplies(const std::string& code) const;
  // Waits until ErrorReplies(code) > `above`; false after patience.
  bool WaitForErrorReplies(const std::string& code, int64_t above) const;

 private:
  struct Node {
    int port = 0;
    std::string dir;
    std::unique_ptr<ChildProcess> process;
  };

  // Starts one node on a free pair of ports.
  absl::Status StartNode(Node& node, int index);
  // Runs redis-server for `node` on its port in its directory and waits
  // until it accepts connections; ALREADY_EXISTS when its ports are taken.
  absl::Status Launch(Node& node);
  absl::Status CreateCluster();
  // The port of the master that serves `slot`, 0 if no live node says.
  int OwnerOf(int slot) const;
  // The ports of the masters serving slots, as the node at `port` sees them,
  // in slot order.
  absl::StatusOr<std::vector<int>> MasterPortsSeenBy(int port) const;

  const RedisClusterOptions options_;
  TempDir dir_;
  std::vector<Node> nodes_;
  absl::Status status_;
};

}  // namespace lapse::testing

#endif  // LAPSE_TESTING_REDIS_CLUSTER_H_
