import LANSyncCrypto
import LANSyncIdentity
import Synchronization

/// The group's epochs while the agent runs: a removal made here (`lansync group remove`) or
/// learned from a member moves them forward without a restart (see `docs/protocol.md` §11).
final class GroupState: Sendable {
    private let state: Mutex<GroupEpochs>

    init(_ epochs: GroupEpochs) { state = Mutex(epochs) }

    var epochs: GroupEpochs { state.withLock { $0 } }
    var current: GroupSecret { state.withLock { $0.current } }
    var epoch: UInt64 { state.withLock { $0.epoch } }

    /// Replaces the epochs; returns whether the current one changed.
    func replace(with epochs: GroupEpochs) -> Bool {
        state.withLock { state in
            let moved = state.epoch != epochs.epoch
            state = epochs
            return moved
        }
    }

    /// The handshake keys: the current epoch's first (what this node dials with), then the
    /// earlier ones a responder also accepts from a member that was away.
    var psks: [(epoch: UInt64, key: SecureBytes)] { epochs.all.map { ($0.epoch, $0.group.noisePSK) } }

    /// The key of one epoch held, for dialing a node found advertising that epoch's tag.
    func psk(epoch: UInt64) -> (epoch: UInt64, key: SecureBytes)? {
        epochs.all.first { $0.epoch == epoch }.map { ($0.epoch, $0.group.noisePSK) }
    }

    /// Every tag a member accepts at a moment, with the epoch it belongs to.
    func acceptedTags(atSeconds seconds: Int64, length: Int64) -> [String: UInt64] {
        var tags: [String: UInt64] = [:]
        for (epoch, group) in epochs.all.reversed() {
            for tag in group.acceptedTags(atSeconds: seconds, length: length) { tags[tag] = epoch }
        }
        return tags
    }
}
