import LANSyncCrypto
import LANSyncIdentity
import Synchronization

/// The group's epochs while the agent runs: a removal made here (`lansync group remove`) or
/// learned from a member moves them forward without a restart (see `docs/protocol.md` §11).
final class GroupState: Sendable {
    /// The epochs, and each one's handshake key (derived once, when the epochs change: a responder
    /// needs them all on every connection), the current epoch's first.
    private let state: Mutex<(epochs: GroupEpochs, psks: [(epoch: UInt64, key: SecureBytes)])>

    init(_ epochs: GroupEpochs) { state = Mutex((epochs, Self.keys(epochs))) }

    private static func keys(_ epochs: GroupEpochs) -> [(epoch: UInt64, key: SecureBytes)] {
        epochs.all.map { ($0.epoch, $0.group.noisePSK) }
    }

    var epochs: GroupEpochs { state.withLock { $0.epochs } }
    var current: GroupSecret { state.withLock { $0.epochs.current } }
    var epoch: UInt64 { state.withLock { $0.epochs.epoch } }

    /// Replaces the epochs; returns whether the current one changed.
    func replace(with epochs: GroupEpochs) -> Bool {
        let keys = Self.keys(epochs)
        return state.withLock { state in
            let moved = state.epochs.epoch != epochs.epoch
            state = (epochs, keys)
            return moved
        }
    }

    /// The handshake keys: the current epoch's first (what this node dials with), then the
    /// earlier ones a responder also accepts from a member that was away.
    var psks: [(epoch: UInt64, key: SecureBytes)] { state.withLock { $0.psks } }

    /// The current epoch's key, to dial with.
    var currentPSK: (epoch: UInt64, key: SecureBytes) { state.withLock { $0.psks[0] } }

    /// The key of one epoch held, for dialing a node found advertising that epoch's tag.
    func psk(epoch: UInt64) -> (epoch: UInt64, key: SecureBytes)? {
        state.withLock { $0.psks.first { $0.epoch == epoch } }
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
