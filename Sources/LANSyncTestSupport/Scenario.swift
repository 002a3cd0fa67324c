package import LANSyncCore
import LANSyncStore

/// Builds replica states from a list of small integers, each one an operation: what the property
/// tests generate, shrink and replay.
///
/// An operation picks a replica (of three) and a kind: append an entry with an id from a small
/// shared pool (so different replicas write different versions of one id), append a fresh entry,
/// set or unset a key from a small pool (so writes conflict), or pull a delta from another replica.
/// Physical clocks jump around, backwards included, to exercise the hybrid logical clock.
package struct Scenario {
    package static let hasher = ReplicaStore.elementHasher  // the store's, so digests compare
    package static let devices = (0..<3).map { DeviceID(bytes: [UInt8](repeating: UInt8($0 + 1), count: 16))! }

    package var replicas: [ReplicaState]
    /// Every entry and preference write ever made, for soundness checks.
    package var entriesMade: [Entry] = []
    package var writesMade: [PreferenceWrite] = []
    /// Deltas pulled during the run, for delivery-order checks.
    package var deltas: [Delta] = []

    package init(operations: [Int]) {
        replicas = (0..<3).map { index in
            ReplicaState(
                replica: ReplicaID(high: UInt64(index + 1) << 56, low: UInt64(index)),
                device: Self.devices[index],
                hasher: Self.hasher
            )
        }
        var fresh = 0
        for operation in operations {
            let index = operation % 3
            let kind = (operation / 3) % 5
            let pick = (operation / 15) % 4
            let now = UInt64(1_000 + (operation &* 7919) % 50)
            switch kind {
            case 0:
                entriesMade.append(
                    replicas[index].append(
                        id: "shared-\(pick)",
                        stream: "taps",
                        payload: "{\"v\":\(operation)}",
                        now: now
                    )
                )
            case 1:
                fresh += 1
                entriesMade.append(
                    replicas[index].append(id: "fresh-\(fresh)", stream: "log", payload: "\(operation)", now: now)
                )
            case 2:
                writesMade.append(replicas[index].set(key: "key/\(pick)", value: "\(operation)", now: now))
            case 3:
                writesMade.append(replicas[index].set(key: "key/\(pick)", value: nil, now: now))
            default:
                let source = (index + 1 + pick % 2) % 3
                let delta = replicas[source].delta(since: replicas[index].versionVector)
                deltas.append(delta)
                replicas[index].merge(delta)
            }
        }
        for replica in replicas { deltas.append(replica.delta(since: VersionVector())) }
    }

    package static func fresh(_ index: Int = 9) -> ReplicaState {
        ReplicaState(replica: ReplicaID(high: 0xFF, low: UInt64(index)), device: devices[0], hasher: hasher)
    }

    package static func merged(_ states: ReplicaState...) -> ReplicaState {
        var result = fresh()
        for state in states { result.merge(state) }
        return result
    }

    /// `deltas` in the order `keys` sorts them (deltas beyond the keys keep their place): how
    /// property tests turn generated numbers into a delivery order.
    package static func ordered(_ deltas: [Delta], by keys: [Int]) -> [Delta] {
        deltas.enumerated().map { index, delta in (key: index < keys.count ? keys[index] : index, delta: delta) }
            .sorted { $0.key < $1.key }.map(\.delta)
    }
}
