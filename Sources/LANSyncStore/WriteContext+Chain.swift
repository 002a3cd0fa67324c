import Foundation
import GRDB
import LANSyncCore
import LANSyncCrypto

/// This replica's own change chain (docs/signed-changes.md): every change it makes extends the
/// chain by the change's leaf, and its device signs the head at the end of each commit and at
/// its points, where catch-ups may be cut: every 256th counter, and before a change that would
/// take the changes since the last point past 1 MiB. Between two points there are thus at most
/// 256 changes and at most 1 MiB of them (or one larger change), so that one range and its
/// signature always fit in one wire message. Without a signing key (a tool that opened the
/// replica without its identity) the heads are kept unsigned and signed by the next commit
/// that has the key.
struct OwnChain {
    /// The head after the last change made in this transaction.
    var head: ChainHead
    /// The counter the head was at when the transaction loaded it.
    let loadedAt: UInt64
    /// About how many bytes the changes after the last point take.
    var bytesSincePoint: Int
    /// Heads to keep in `chain_points`: points reached, and a genesis.
    var points: [ChainHead] = []

    /// A point at every multiple of this counter.
    static let pointInterval: UInt64 = 256
    /// A point before a change that would take the changes since the last one past this size.
    static let pointBytes = 1 << 20

    /// Extends the chain by one change of about `bytes` bytes whose leaf is `leaf`.
    mutating func extend(by leaf: [UInt8], bytes: Int, hasher: ElementHasher, reusing buffer: inout [UInt8]) {
        if bytesSincePoint > 0, bytesSincePoint + bytes > Self.pointBytes, points.last != head {
            points.append(head)
            bytesSincePoint = 0
        }
        head = head.extended(by: leaf, hasher: hasher, reusing: &buffer)
        bytesSincePoint += bytes
        if head.counter % Self.pointInterval == 0 {
            points.append(head)
            bytesSincePoint = 0
        }
    }
}

extension WriteContext {
    /// Extends this replica's chain by the leaf of a change it just made under `dot` (the
    /// latest from `nextDot()`), of about `bytes` bytes on the wire.
    mutating func chainOwn(leaf: [UInt8], dot: Dot, bytes: Int) throws {
        precondition(dot.replica == replica, "only this replica's own changes extend its chain")
        var chain = try ownChain(before: dot.counter)
        if chain.head.counter != dot.counter - 1 {
            // Counters this chain never saw (none in a replica this build wrote): a new genesis,
            // below which the changes count as unsigned history.
            chain.head = ChainHead(replica: replica, counter: dot.counter - 1, hash: Self.genesisHash)
            chain.points.append(chain.head)
            chain.bytesSincePoint = 0
        }
        chain.extend(by: leaf, bytes: bytes, hasher: hasher, reusing: &hashBuffer)
        ownChain = chain
    }

    static let genesisHash = [UInt8](repeating: 0, count: ChainHead.hashByteCount)

    /// The chain as this transaction found it: the stored head, or a genesis at the counter
    /// before `counter` when this replica has none (a new replica, or one this build upgraded:
    /// its earlier changes were written unsigned).
    private mutating func ownChain(before counter: UInt64) throws -> OwnChain {
        if let ownChain { return ownChain }
        let number = try number(of: replica)
        let row = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT counter, hash, bytes_since_point FROM chain_heads WHERE replica = ?"), arguments: [number])
        if let row, let hash = (row[1] as Data?).map({ [UInt8]($0) }), hash.count == ChainHead.hashByteCount {
            let head = ChainHead(replica: replica, counter: UInt64(row[0] as Int64), hash: hash)
            return OwnChain(head: head, loadedAt: head.counter, bytesSincePoint: row[2])
        }
        let genesis = ChainHead(replica: replica, counter: counter - 1, hash: Self.genesisHash)
        return OwnChain(head: genesis, loadedAt: genesis.counter, bytesSincePoint: 0, points: [genesis])
    }

    /// Stores the chain's new head and points, signed when this store has its device's key, and
    /// signs heads an earlier commit without the key left unsigned.
    mutating func saveOwnChain() throws {
        guard let chain = ownChain, chain.head.counter > chain.loadedAt || !chain.points.isEmpty else { return }
        let number = try number(of: replica)
        func signature(_ head: ChainHead) -> Data? { signer.map { Data($0.sign(head.signedMessage)) } }
        try db.execute(
            sql: "INSERT OR REPLACE INTO chain_heads (replica, counter, hash, signature, bytes_since_point) VALUES (?, ?, ?, ?, ?)",
            arguments: [number, Int64(chain.head.counter), Data(chain.head.hash), signature(chain.head), chain.bytesSincePoint])
        let point = try db.cachedStatement(sql: "INSERT OR REPLACE INTO chain_points (dot, hash, signature) VALUES (?, ?, ?)")
        for head in chain.points {
            try point.execute(arguments: [DotKey.key(number: number, counter: head.counter), Data(head.hash), signature(head)])
        }
        ownChain = OwnChain(head: chain.head, loadedAt: chain.head.counter, bytesSincePoint: chain.bytesSincePoint)
        guard signer != nil else { return }
        // Points an earlier commit kept unsigned (the partial index finds them without a scan).
        let unsigned = try Row.fetchAll(
            db.cachedStatement(sql: "SELECT dot, hash FROM chain_points WHERE signature IS NULL AND dot >= ? AND dot <= ?"),
            arguments: [DotKey.key(number: number, counter: 0), DotKey.key(number: number, counter: Dot.maxCounter)])
        let sign = try db.cachedStatement(sql: "UPDATE chain_points SET signature = ? WHERE dot = ?")
        for row in unsigned {
            let head = ChainHead(replica: replica, counter: DotKey.counter(row[0]), hash: [UInt8](row[1] as Data))
            try sign.execute(arguments: [signature(head), row[0] as Int64])
        }
    }

    // MARK: Stubs of superseded entries and preference writes

    /// Keeps an entry that lost to another version of its id, whole, so that its leaf can still be
    /// sent (the receiver's merge drops it again).
    mutating func keepLosingEntry(_ entry: Entry) throws {
        let statement = try db.cachedStatement(
            sql: """
                INSERT OR IGNORE INTO entry_stubs (dot, id, stream, origin_device, hlc, wall_ms, payload)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """)
        try statement.execute(arguments: [
            try dotKey(entry.dot), entry.id, entry.stream, blob(entry.originDevice), Int64(entry.hlc.rawValue),
            entry.wallMilliseconds, entry.payload,
        ])
    }

    /// Keeps what a superseded preference write's leaf needs (`PreferenceStub`).
    mutating func keepLosingPreference(_ write: PreferenceWrite, elementHash: [UInt8]) throws {
        let statement = try db.cachedStatement(
            sql: "INSERT OR IGNORE INTO preference_stubs (dot, key, hlc, element_hash) VALUES (?, ?, ?, ?)")
        try statement.execute(arguments: [try dotKey(write.dot), write.key, Int64(write.hlc.rawValue), Data(elementHash)])
    }
}
