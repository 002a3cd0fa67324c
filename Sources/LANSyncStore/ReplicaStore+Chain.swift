import Foundation
import GRDB
package import LANSyncCore
import LANSyncCrypto
import Synchronization

/// Replicas' change chains as this replica holds them (docs/signed-changes.md): the signed heads,
/// and the leaves of a replica's changes rebuilt from what is stored — the rows that win and the
/// stubs of those that lost.
extension ReplicaStore {
    /// The latest head of `replica`'s chain this replica holds, with its signature (nil while
    /// unsigned); nil when it holds none.
    package func chainHead(of replica: ReplicaID) throws(StoreError) -> SignedChainPoint? {
        try Self.database {
            try writer.read { db in
                guard let number = try Self.number(of: replica, db) else { return nil }
                let row = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT counter, hash, signature FROM chain_heads WHERE replica = ?"),
                    arguments: [number]
                )
                return row.map {
                    SignedChainPoint(
                        head: ChainHead(
                            replica: replica,
                            counter: UInt64($0[0] as Int64),
                            hash: [UInt8]($0[1] as Data)
                        ),
                        signature: ($0[2] as Data?).map { [UInt8]($0) }
                    )
                }
            }
        }
    }

    /// The points kept of `replica`'s chain (its genesis and every 256th counter), in counter order.
    package func chainPoints(of replica: ReplicaID) throws(StoreError) -> [SignedChainPoint] {
        try Self.database {
            try writer.read { db in
                guard let number = try Self.number(of: replica, db) else { return [] }
                return try Row.fetchAll(
                    db,
                    sql: "SELECT dot, hash, signature FROM chain_points WHERE dot >= ? AND dot <= ? ORDER BY dot",
                    arguments: [
                        DotKey.key(number: number, counter: 0), DotKey.key(number: number, counter: Dot.maxCounter),
                    ]
                ).map {
                    SignedChainPoint(
                        head: ChainHead(replica: replica, counter: DotKey.counter($0[0]), hash: [UInt8]($0[1] as Data)),
                        signature: ($0[2] as Data?).map { [UInt8]($0) }
                    )
                }
            }
        }
    }

    /// The leaves of `replica`'s changes with counters in `(from, through]` that this replica holds,
    /// in counter order: each rebuilt from the change as stored, or from its stub when it lost.
    /// A counter missing from the result is one this replica holds nothing of.
    package func chainLeaves(
        of replica: ReplicaID,
        from: UInt64,
        through: UInt64
    ) throws(StoreError) -> [(counter: UInt64, leaf: [UInt8])] {
        let hasher = hasher
        return try Self.database {
            try writer.read { db in
                guard let number = try Self.number(of: replica, db) else { return [] }
                return try Self.leaves(
                    number: number,
                    from: from,
                    through: through,
                    db: db,
                    hasher: hasher,
                    catalogs: apps.catalogCache
                ).map {
                    ($0.counter, $0.leaf)
                }
            }
        }
    }

    /// This replica's chain extended over the changes it made since its head, and signed with the
    /// device's key when this store has it (heads an earlier call left unsigned included); returns
    /// the head. A change's leaf is a pure function of the change, which the store can rebuild at
    /// any time from the change or its stub, so the chain can be built after the writes: a bulk
    /// insert pays nothing for it. (While an agent runs, small commits extend it themselves:
    /// `extendChainInCommits`.) The agent calls this before it sends this replica's changes
    /// whenever the chain may not cover them (`chainCoversKnownWrites`).
    @discardableResult
    package func extendOwnChain() async throws(StoreError) -> SignedChainPoint? {
        let (hasher, signer, replica, coverage) = (hasher, headSigner, replica, chainCoverage)
        let catalogs = apps.catalogCache
        // Every write counted before this read is covered once the extension is stored.
        let mark = coverage.uncovered.load(ordering: .acquiring)
        let head: SignedChainPoint? = try await Self.database {
            // The hashing and signing run on a snapshot, beside the writer: an app's next write
            // waits only for the short transaction that stores the result, not for the work.
            let planned = try await writer.read { db in
                try ChainExtension.plan(of: replica, db: db, hasher: hasher, signer: signer, catalogs: catalogs)
            }
            if let planned, !planned.writes { return planned.result }
            // Committed with the writer's usual full sync. The chain is derived data (a head lost
            // in a power cut is extended and signed again: Ed25519 signs deterministically), but
            // switching this transaction to `synchronous = NORMAL` and back made every later
            // commit on the connection slower (docs/journal/2026-11-speed.md). Small commits
            // extend the chain themselves now, so this transaction is rare.
            return try await writer.writeWithoutTransaction { db in
                var head: SignedChainPoint?
                try db.inTransaction {
                    // Another extension (a commit's, say) may have stored its own since the
                    // snapshot: then plan again, inside this transaction.
                    if let planned, try planned.headUnchanged(db) {
                        try planned.write(db)
                        head = planned.result
                    } else if let replanned = try ChainExtension.plan(
                        of: replica,
                        db: db,
                        hasher: hasher,
                        signer: signer,
                        catalogs: catalogs
                    ) {
                        try replanned.write(db)
                        head = replanned.result
                    }
                    return .commit
                }
                return head
            }
        }
        coverage.covered.max(mark, ordering: .releasing)
        return head
    }

    /// Makes every local commit of at most `ChainCoverage.limit` changes extend and sign this
    /// replica's chain inside its own transaction, as the agent wants while it runs: a change can
    /// then be pushed as soon as it commits, and the app's next write does not wait behind a
    /// transaction of the chain's own. A larger commit (a bulk insert) leaves its changes to
    /// `extendOwnChain`, off the write path. Extending in the commit lowers the appends' p99
    /// (`lansync-bench --api`; figures in docs/journal/2026-11-speed.md).
    package func extendChainInCommits(_ enabled: Bool) {
        chainCoverage.extendsInCommits.store(enabled && headSigner != nil, ordering: .relaxed)
    }

    /// Whether this replica's chain covers every write this store knows of: its own local
    /// commits, and writes by other processes reported with `noteWriteByAnotherProcess`. When
    /// it does, there is nothing for `extendOwnChain` to do, and the agent pushes at once
    /// without reading the replica first.
    package var chainCoversKnownWrites: Bool {
        chainCoverage.covered.load(ordering: .acquiring) >= chainCoverage.uncovered.load(ordering: .acquiring)
    }

    /// The replica changed in a way this store may not have made (another process's write; the
    /// agent's file watch sees every commit, this process's too): the chain is not known to cover
    /// it until the next `extendOwnChain`, which finds nothing to do when it was this process's.
    package func noteWriteByAnotherProcess() {
        chainCoverage.uncovered.add(1, ordering: .releasing)
    }

    /// Extends the chain inside the caller's transaction of local writes when
    /// `extendChainInCommits` is on and the chain is at most `ChainCoverage.limit` changes behind;
    /// a failure only leaves the chain to `extendOwnChain`. Returns whether the chain covers the
    /// transaction's writes; the caller passes that to `committed(coveringChain:)` after the commit.
    static func extendInCommit(
        _ coverage: ChainCoverage,
        replica: ReplicaID,
        signer: SigningKey?,
        db: Database,
        hasher: ElementHasher,
        catalogs: AppCatalogCache
    ) -> Bool {
        guard coverage.extendsInCommits.load(ordering: .relaxed), let signer else { return false }
        do {
            guard
                let planned = try ChainExtension.plan(
                    of: replica,
                    db: db,
                    hasher: hasher,
                    signer: signer,
                    limit: ChainCoverage.limit,
                    catalogs: catalogs
                )
            else { return false }
            // Planned in this transaction: the head it read is still the stored one.
            try planned.write(db)
            return true
        } catch {
            return false
        }
    }

    /// `extendOwnChain`'s work: what a read of the replica says to store, and the head it makes.
    struct ChainExtension {
        let number: Int64
        /// The stored head's counter and whether it was signed, as read (`headUnchanged`).
        let stored: (counter: Int64, signed: Bool)?
        /// Points of the chain passed (every 256th counter, and where 1 MiB of changes passed).
        var points: [(dot: Int64, hash: Data, signature: Data?)] = []
        var head: (counter: Int64, hash: Data, signature: Data?, bytesSincePoint: Int)?
        /// Signatures for points an earlier extension without the key left unsigned.
        var signedLater: [(dot: Int64, signature: Data)] = []
        let result: SignedChainPoint

        /// Whether anything is to be stored.
        var writes: Bool { head != nil || !points.isEmpty || !signedLater.isEmpty }

        /// Nil when this replica has made nothing yet (no chain), or when the chain is more than
        /// `limit` changes behind.
        static func plan(
            of replica: ReplicaID,
            db: Database,
            hasher: ElementHasher,
            signer: SigningKey?,
            limit: UInt64 = .max,
            catalogs: AppCatalogCache
        ) throws
            -> ChainExtension?
        {
            guard let number = try ReplicaStore.number(of: replica, db) else { return nil }
            let counter = UInt64(
                try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT counter FROM replicas WHERE num = ?"),
                    arguments: [number]
                ) ?? 0
            )
            guard counter > 0 else { return nil }
            let loaded = try OwnChain.load(replica: replica, number: number, db: db)
            var chain = loaded.chain
            guard counter - chain.head.counter <= limit else { return nil }
            let storedSignature = loaded.signature
            let stored = loaded.stored ? (counter: Int64(chain.head.counter), signed: storedSignature != nil) : nil
            if chain.head.counter == counter, storedSignature != nil || signer == nil {
                // Up to date: nothing to write.
                return ChainExtension(
                    number: number,
                    stored: stored,
                    result: SignedChainPoint(head: chain.head, signature: storedSignature.map { [UInt8]($0) })
                )
            }
            func signature(_ head: ChainHead) -> Data? { signer.map { Data($0.sign(head.signedMessage)) } }
            var points: [(dot: Int64, hash: Data, signature: Data?)] = []
            if chain.head.counter < counter {
                let leaves = try ReplicaStore.leaves(
                    number: number,
                    from: chain.head.counter,
                    through: counter,
                    db: db,
                    hasher: hasher,
                    catalogs: catalogs
                )
                var buffer = [UInt8]()
                // Counters of this replica it holds no change of (a peer of protocol version 3
                // claimed them without rows, which version 4 refuses) take the "none" leaf.
                func extendOverNothing(until end: UInt64) {
                    while chain.head.counter < end {
                        let none = ChangeLeaf.none(replica: replica, counter: chain.head.counter + 1, hasher: hasher)
                        chain.extend(by: none, bytes: 0, hasher: hasher, reusing: &buffer)
                    }
                }
                for leaf in leaves {
                    extendOverNothing(until: leaf.counter - 1)
                    chain.extend(by: leaf.leaf, bytes: leaf.bytes, hasher: hasher, reusing: &buffer)
                }
                extendOverNothing(until: counter)
                points = chain.points.map {
                    (DotKey.key(number: number, counter: $0.counter), Data($0.hash), signature($0))
                }
            }
            let unmoved = stored.map { UInt64($0.counter) } == chain.head.counter
            let headSignature = unmoved && storedSignature != nil ? storedSignature : signature(chain.head)
            var plan = ChainExtension(
                number: number,
                stored: stored,
                points: points,
                head: (Int64(chain.head.counter), Data(chain.head.hash), headSignature, chain.bytesSincePoint),
                result: SignedChainPoint(head: chain.head, signature: headSignature.map { [UInt8]($0) })
            )
            if signer != nil, stored?.signed != true {
                // Points a call without the key kept unsigned (the partial index finds them without a
                // scan). There are none under a signed head: an extension without the key leaves its
                // head unsigned too, and the next one with the key signs both.
                let unsigned = try Row.fetchAll(
                    db.cachedStatement(
                        sql: "SELECT dot, hash FROM chain_points WHERE signature IS NULL AND dot >= ? AND dot <= ?"
                    ),
                    arguments: [
                        DotKey.key(number: number, counter: 0), DotKey.key(number: number, counter: Dot.maxCounter),
                    ]
                )
                for row in unsigned {
                    let head = ChainHead(
                        replica: replica,
                        counter: DotKey.counter(row[0]),
                        hash: [UInt8](row[1] as Data)
                    )
                    if let signed = signature(head) { plan.signedLater.append((row[0], signed)) }
                }
            }
            return plan
        }

        /// Whether the stored head is still the one the plan was made from: a plan made on an
        /// earlier snapshot may be stored only then.
        func headUnchanged(_ db: Database) throws -> Bool {
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT counter, signature FROM chain_heads WHERE replica = ?"),
                arguments: [number]
            )
            let now = row.map { (counter: $0[0] as Int64, signed: ($0[1] as Data?) != nil) }
            return now?.counter == stored?.counter && now?.signed == stored?.signed
        }

        /// Writes the plan in the caller's write transaction.
        func write(_ db: Database) throws {
            let point = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO chain_points (dot, hash, signature) VALUES (?, ?, ?)"
            )
            for each in points { try point.execute(arguments: [each.dot, each.hash, each.signature]) }
            if let head {
                try db.execute(
                    sql:
                        "INSERT OR REPLACE INTO chain_heads (replica, counter, hash, signature, bytes_since_point) VALUES (?, ?, ?, ?, ?)",
                    arguments: [number, head.counter, head.hash, head.signature, head.bytesSincePoint]
                )
            }
            for each in signedLater {
                try db.execute(
                    sql: "UPDATE chain_points SET signature = ? WHERE dot = ?",
                    arguments: [each.signature, each.dot]
                )
            }
        }
    }

    /// Every change of `replica` in `(from, through]` that this replica holds, as a delta that
    /// covers that range: what protocol version 4 sends, superseded changes included as stubs, so
    /// that a receiver can rebuild every leaf, with the replica's signature of its head at
    /// `through` when this replica holds one (a point, or the latest head) and its genesis when
    /// the range starts at or below it. Rows in counter order within each list.
    package func signedRange(of replica: ReplicaID, after from: UInt64, through: UInt64) throws(StoreError) -> Delta {
        precondition(from < through, "a range covers at least one counter")
        return try Self.database {
            try writer.read { db in
                guard let number = try Self.number(of: replica, db) else { return Delta() }
                return try Self.signedRange(
                    of: replica,
                    number: number,
                    after: from,
                    through: through,
                    db: db,
                    catalogs: apps.catalogCache
                )
            }
        }
    }

    static func signedRange(
        of replica: ReplicaID,
        number: Int64,
        after from: UInt64,
        through: UInt64,
        db: Database,
        catalogs: AppCatalogCache
    ) throws -> Delta {
        try signedRange(
            of: replica,
            number: number,
            after: from,
            through: through,
            holding: RangeContents.read(number: number, from: from, through: through, db: db, catalogs: catalogs),
            db: db
        )
    }

    /// The range `(from, through]` of `replica` made of `contents` (read beforehand), with its
    /// signature, genesis and record.
    static func signedRange(
        of replica: ReplicaID,
        number: Int64,
        after from: UInt64,
        through: UInt64,
        holding contents: RangeContents,
        db: Database
    ) throws -> Delta {
        var delta = contents.delta
        let signature = try Data.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT signature FROM chain_points WHERE dot = ? AND signature IS NOT NULL
                    UNION ALL SELECT signature FROM chain_heads WHERE replica = ? AND counter = ? AND signature IS NOT NULL
                    """
            ),
            arguments: [DotKey.key(number: number, counter: through), number, Int64(through)]
        )
        // The replica's latest genesis at or below the range's end, when the range starts at or
        // below it (so only the points of the range itself are looked at).
        let genesis = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT dot, signature FROM chain_points WHERE dot >= ? AND dot <= ? AND hash = zeroblob(32) AND signature IS NOT NULL
                    ORDER BY dot DESC LIMIT 1
                    """
            ),
            arguments: [DotKey.key(number: number, counter: from), DotKey.key(number: number, counter: through)]
        ).map { ProvenanceCheck.Genesis(counter: DotKey.counter($0[0]), signature: [UInt8]($0[1] as Data)) }
        // The replica's record, when the range starts below it: a receiver may not hold it yet.
        let record = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT value, dot FROM preferences WHERE key = ?"),
            arguments: [PreferenceWrite.replicaRecordPrefix + replica.description]
        ).flatMap { row -> String? in DotKey.counter(row[1]) > from ? row[0] : nil }
        delta.coverage = [
            .init(
                replica: replica,
                from: from,
                through: through,
                signature: signature.map { [UInt8]($0) },
                genesis: genesis.flatMap { $0.counter >= from ? $0 : nil },
                record: record
            )
        ]
        return delta
    }

    /// One bounded batch of what a replica covering `known` lacks, in signed ranges (version 4's
    /// `delta(since:)`): for each replica, one range from what `known` covers up to a counter
    /// where this replica holds the replica's signed head, never past `bound`. A range ends at a
    /// signed point: the batch takes whole stretches between points (at most 256 changes or about
    /// 1 MiB each, see `OwnChain`), read once each, while they fit in `maxRows` changes; it passes
    /// `maxRows` only when its first stretch alone does, and `maxBytes` by at most one stretch:
    /// with the defaults, at most 2,000 changes and about 2 MiB, within one wire message. A receiver keeps the head a range ends at, so a
    /// relay's ranges are at most the batches it received. Empty when nothing signed is left to
    /// send. One read transaction.
    package func signedDelta(
        since known: VersionVector,
        upTo bound: VersionVector? = nil,
        maxRows: Int,
        maxBytes: Int = 1 << 20
    ) throws(StoreError) -> Delta {
        let catalogs = apps.catalogCache
        return try Self.database {
            try writer.read { db in
                var delta = Delta()
                var rows = 0
                var bytes = 0
                for (replica, number, points) in try Self.signedPoints(
                    above: known,
                    upTo: bound,
                    limit: Self.pointsPerBatch,
                    db
                ) {
                    guard rows < maxRows, bytes < maxBytes else { break }
                    let from = known[replica]
                    // Most batches are read in one go: up to the first point whose counters (an
                    // upper bound on its changes) reach the rows left. Only when that passes the
                    // bytes left (large values) is it read again stretch by stretch.
                    // The last point whose counters (an upper bound on its changes) fit in the
                    // rows left; the first point when none does (a batch takes at least one stretch).
                    var through = from
                    for point in points {
                        if point - from > UInt64(maxRows - rows), through > from || rows > 0 { break }
                        through = point
                        if point - from >= UInt64(maxRows - rows) { break }
                    }
                    guard through > from else { continue }
                    var contents = try RangeContents.read(
                        number: number,
                        from: from,
                        through: through,
                        db: db,
                        catalogs: catalogs
                    )
                    if bytes + contents.byteEstimate <= maxBytes || through == points[0] {
                        rows += contents.count
                        bytes += contents.byteEstimate
                    } else {
                        let end = through
                        (through, contents) = (from, RangeContents())
                        for point in points where point <= end {
                            guard rows < maxRows, bytes < maxBytes else { break }
                            let stretch = try RangeContents.read(
                                number: number,
                                from: through,
                                through: point,
                                db: db,
                                catalogs: catalogs
                            )
                            contents.append(stretch)
                            rows += stretch.count
                            bytes += stretch.byteEstimate
                            through = point
                        }
                    }
                    let range = try Self.signedRange(
                        of: replica,
                        number: number,
                        after: from,
                        through: through,
                        holding: contents,
                        db: db
                    )
                    delta.entries += range.entries
                    delta.preferences += range.preferences
                    delta.preferenceStubs += range.preferenceStubs
                    delta.rows += range.rows
                    delta.lostCells.merge(range.lostCells) { first, _ in first }
                    delta.coverage += range.coverage
                }
                return delta
            }
        }
    }

    /// The most points a batch looks at per replica: points are at most 256 counters apart at
    /// their origin, so 64 of them span more than a batch's rows; where values are large, the
    /// 1 MiB points come closer, but then the batch's bytes end it first.
    static let pointsPerBatch = 64

    /// Per replica whose signed head this replica holds above `known`, the counters in
    /// `(known, bound]` where it holds one of its signed heads (points, geneses and the latest
    /// head), ascending: at most `limit` of them, the first ones.
    static func signedPoints(
        above known: VersionVector,
        upTo bound: VersionVector?,
        limit: Int,
        _ db: Database
    ) throws
        -> [(ReplicaID, number: Int64, points: [UInt64])]
    {
        var found: [(ReplicaID, number: Int64, points: [UInt64])] = []
        let heads = try Row.fetchAll(
            db.cachedStatement(
                sql:
                    "SELECT r.replica_id, h.replica, h.counter FROM chain_heads h JOIN replicas r ON r.num = h.replica WHERE h.signature IS NOT NULL"
            )
        )
        for row in heads {
            let replica = ReplicaID(bytes: [UInt8](row[0] as Data))!
            let (number, head) = (row[1] as Int64, UInt64(row[2] as Int64))
            let from = known[replica]
            let through = min(head, bound?[replica] ?? .max)
            guard through > from else { continue }
            var points = try Int64.fetchAll(
                db.cachedStatement(
                    sql:
                        "SELECT dot FROM chain_points WHERE dot > ? AND dot <= ? AND signature IS NOT NULL ORDER BY dot LIMIT ?"
                ),
                arguments: [
                    DotKey.key(number: number, counter: from), DotKey.key(number: number, counter: through), limit,
                ]
            ).map(DotKey.counter)
            if head == through, points.count < limit, points.last != head { points.append(head) }
            found.append((replica, number, points))
        }
        return found.sorted { $0.0 < $1.0 }
    }

    /// The leaves of the changes numbered `(from, through]` of replica `number`, with about how
    /// many bytes each takes on the wire as shipped; a counter with no change has none here.
    static func leaves(
        number: Int64,
        from: UInt64,
        through: UInt64,
        db: Database,
        hasher: ElementHasher,
        catalogs: AppCatalogCache
    ) throws
        -> [(counter: UInt64, leaf: [UInt8], bytes: Int)]
    {
        let contents = try RangeContents.read(number: number, from: from, through: through, db: db, catalogs: catalogs)
        var leaves: [(counter: UInt64, leaf: [UInt8], bytes: Int)] = []
        leaves.reserveCapacity(contents.count)
        var buffer = [UInt8]()
        for entry in contents.entries {
            // `ChangeLeaf.entry`, with one buffer for every entry.
            leaves.append((entry.dot.counter, hasher.hash(entry, reusing: &buffer), entry.byteEstimate))
        }
        for write in contents.preferences {
            leaves.append((write.dot.counter, ChangeLeaf.preference(write, hasher: hasher), write.byteEstimate))
        }
        for stub in contents.preferenceStubs {
            leaves.append((stub.dot.counter, ChangeLeaf.preference(stub, hasher: hasher), stub.byteEstimate))
        }
        for (change, lost) in contents.rows {
            guard let leaf = change.leaf(lost: lost, hasher: hasher, reusing: &buffer) else {
                throw StoreError(
                    .database,
                    "the stub of change \(change.dot) of \(change.key) names a column twice; the database is damaged"
                )
            }
            leaves.append((change.dot.counter, leaf, change.byteEstimate(lost: lost)))
        }
        leaves.sort { $0.counter < $1.counter }
        return leaves
    }

    static func number(of replica: ReplicaID, _ db: Database) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT num FROM replicas WHERE replica_id = ?"),
            arguments: [Data(replica.bytes)]
        )
    }
}

/// A head of a replica's chain as stored, with the device's signature (nil while unsigned: a
/// replica's own head written by a tool that did not hold the device's key).
package struct SignedChainPoint: Hashable, Sendable {
    package let head: ChainHead
    package let signature: [UInt8]?

    /// The head with its signature, once signed.
    package var signed: SignedHead? { signature.map { SignedHead(head: head, signature: $0) } }
}

/// A replica's own change chain while it is extended (docs/signed-changes.md): its head, and the
/// points to keep — where catch-ups may be cut: every 256th counter, and before a change that
/// would take the changes since the last point past 1 MiB. Between two points there are thus at
/// most 256 changes and at most 1 MiB of them (or one larger change), so that one range and its
/// signature always fit in one wire message.
struct OwnChain {
    var head: ChainHead
    /// About how many bytes the changes after the last point take.
    var bytesSincePoint: Int
    /// Points reached while extending (a genesis included), to keep in `chain_points`.
    var points: [ChainHead] = []

    /// A point at every multiple of this counter.
    static let pointInterval: UInt64 = 256
    /// A point before a change that would take the changes since the last one past this size.
    static let pointBytes = 1 << 20

    /// The stored head of the chain and its signature (nil while unsigned); without one, a genesis
    /// at 0, `stored` false. (An upgraded replica has its genesis at the counter it had reached,
    /// stored by the schema's migration: its earlier changes were written unsigned.)
    static func load(
        replica: ReplicaID,
        number: Int64,
        db: Database
    ) throws -> (chain: OwnChain, stored: Bool, signature: Data?) {
        let sql = "SELECT counter, hash, bytes_since_point, signature FROM chain_heads WHERE replica = ?"
        if let row = try Row.fetchOne(db.cachedStatement(sql: sql), arguments: [number]) {
            let head = ChainHead(replica: replica, counter: UInt64(row[0] as Int64), hash: [UInt8](row[1] as Data))
            return (OwnChain(head: head, bytesSincePoint: row[2]), true, row[3])
        }
        let genesis = ChainHead.genesis(of: replica)
        return (OwnChain(head: genesis, bytesSincePoint: 0, points: [genesis]), false, nil)
    }

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

/// What a replica holds of another's (or its own) range of counters: each change as version 4
/// sends it — entries (losing ones too), preference writes and the stubs of superseded ones,
/// app-table changes with their header as written and the cells of them that lost.
struct RangeContents {
    var entries: [Entry] = []
    var preferences: [PreferenceWrite] = []
    var preferenceStubs: [PreferenceStub] = []
    var rows: [(change: RowChange, lost: [RowChange.LostCell])] = []

    var count: Int { entries.count + preferences.count + preferenceStubs.count + rows.count }

    /// About how many bytes these changes take on the wire.
    var byteEstimate: Int {
        entries.reduce(0) { $0 + $1.byteEstimate } + preferences.reduce(0) { $0 + $1.byteEstimate }
            + preferenceStubs.reduce(0) { $0 + $1.byteEstimate }
            + rows.reduce(0) { $0 + $1.change.byteEstimate(lost: $1.lost) }
    }

    /// Adds the changes of the stretch that follows.
    mutating func append(_ other: RangeContents) {
        entries += other.entries
        preferences += other.preferences
        preferenceStubs += other.preferenceStubs
        rows += other.rows
    }

    var delta: Delta {
        var lostCells: [Dot: [RowChange.LostCell]] = [:]
        for row in rows where !row.lost.isEmpty { lostCells[row.change.dot] = row.lost }
        // Entries come in counter order unless losing ones (`entry_stubs`) were read too.
        let inOrder = entries.indices.dropFirst().allSatisfy { entries[$0 - 1].dot.counter < entries[$0].dot.counter }
        return Delta(
            entries: inOrder ? entries : entries.sorted { $0.dot.counter < $1.dot.counter },
            preferences: preferences,
            rows: rows.map(\.change).sorted { $0.dot.counter < $1.dot.counter },
            preferenceStubs: preferenceStubs,
            lostCells: lostCells
        )
    }

    /// Reads the range through the C API: extending a chain over a bulk insert reads a row per change.
    static func read(
        number: Int64,
        from: UInt64,
        through: UInt64,
        db: Database,
        catalogs: AppCatalogCache
    ) throws -> RangeContents {
        let (lower, upper) = (DotKey.key(number: number, counter: from), DotKey.key(number: number, counter: through))
        let replicas = try ReplicaStore.replicaNumbers(db)
        var contents = RangeContents()
        var devices = RowDecoding.DeviceCache()
        for table in ["entries", "entry_stubs"] {
            let select = try BoundStatement(
                db,
                sql: "SELECT \(RowDecoding.entryColumns) FROM \(table) WHERE dot > ? AND dot <= ?"
            )
            select.bind(1, lower)
            select.bind(2, upper)
            try select.forEachRow { columns in
                contents.entries.append(try RowDecoding.entry(columns, replicas: replicas, devices: &devices))
            }
        }
        contents.preferences = try Row.fetchAll(
            db.cachedStatement(
                sql: "SELECT \(RowDecoding.preferenceColumns) FROM preferences WHERE dot > ? AND dot <= ? ORDER BY dot"
            ),
            arguments: [lower, upper]
        ).map { try RowDecoding.preference($0, replicas: replicas) }
        contents.preferenceStubs = try Row.fetchAll(
            db.cachedStatement(
                sql: "SELECT dot, key, hlc, element_hash FROM preference_stubs WHERE dot > ? AND dot <= ? ORDER BY dot"
            ),
            arguments: [lower, upper]
        ).map {
            PreferenceStub(
                key: $0[1],
                hlc: HybridTimestamp(rawValue: UInt64($0[2] as Int64)),
                dot: try RowDecoding.dot($0[0], replicas: replicas),
                elementHash: [UInt8]($0[3] as Data)
            )
        }
        // App-table changes: live ones rebuilt from their row's state (and their stub when a part
        // of them lost), superseded ones from their stub alone.
        let tables = Dictionary(
            uniqueKeysWithValues: try Row.fetchAll(db.cachedStatement(sql: "SELECT num, name FROM app_tables")).map {
                ($0[0] as Int64, $0[1] as String)
            }
        )
        let columnNames = try ColumnNumbering.load(db).names
        func rowKey(_ table: Int64, _ key: [UInt8], dot: Dot) throws -> RowKey {
            guard let name = tables[table] else {
                throw StoreError(
                    .database,
                    "change \(dot) names app table \(table), which is not registered; the database is damaged"
                )
            }
            return RowKey(table: name, primaryKey: try SQLValue.key(from: key))
        }
        // Changes of which nothing wins any more, from their stubs alone: read first (a catch-up
        // of new rows has none), because a change whose every cell its first sender said lost,
        // and that came whole from another sender later and won after all, is live, and its stub
        // from then may still be here. The live change is the one sent: both at once named one
        // dot twice, and receivers refused the delta.
        var dead: [(dot: Int64, change: RowChange, lost: [RowChange.LostCell])] = []
        let stubs = try BoundStatement(db, sql: "SELECT dot, tbl, key, stub FROM row_stubs WHERE dot > ? AND dot <= ?")
        stubs.bind(1, lower)
        stubs.bind(2, upper)
        try stubs.forEachRow { columns in
            let dot = try RowDecoding.dot(columns.int64(0), replicas: replicas)
            let key = try rowKey(columns.int64(1), columns.withBlob(2) { Array($0) }, dot: dot)
            let stub = try columns.withBlob(3) { try RowChangeStub(canonicalBytes: Array($0)) }
            dead.append((columns.int64(0), stub.change(key: key, dot: dot, in: RowState()), stub.lost))
        }
        let deadDots = Set(dead.map(\.dot))
        var revived = Set<Int64>()
        let rows = AppRowValues(db, catalog: try catalogs.catalog(db))
        try IndexedWrites.forEachWithState(
            db,
            lower: lower,
            upper: upper,
            columns: columnNames,
            replicas: replicas,
            rows: rows
        ) {
            write,
            state in
            let dot = try RowDecoding.dot(write.dot, replicas: replicas)
            let key = try rowKey(write.table, write.key, dot: dot)
            var shown: (change: RowChange, lost: [RowChange.LostCell])?
            if let stub = write.stub {
                let stub = try RowChangeStub(canonicalBytes: stub)
                shown = (stub.change(key: key, dot: dot, in: state), stub.lost)
            } else if let change = state.change(key: key, dot: dot) {
                shown = (change, [])
            } else if !write.inRun {
                throw StoreError(
                    .database,
                    "change \(dot) of \(key) is indexed but not in its row; the database is damaged"
                )
            }
            // A run's change that a later one superseded is read from `row_stubs` (see `DotRun`).
            if let shown {
                contents.rows.append(shown)
                if !deadDots.isEmpty, deadDots.contains(write.dot) { revived.insert(write.dot) }
            }
            return true
        }
        for (dot, change, lost) in dead where !revived.contains(dot) { contents.rows.append((change, lost)) }
        return contents
    }
}

extension ReplicaStore {
    /// Each replica's chain as far as this replica verified it (its own: as far as it extended it).
    package func verifiedHeads() throws(StoreError) -> [ReplicaID: ChainHead] {
        try Self.database {
            try writer.read { db in
                var heads: [ReplicaID: ChainHead] = [:]
                for row in try Row.fetchAll(
                    db.cachedStatement(
                        sql:
                            "SELECT r.replica_id, h.counter, h.hash FROM chain_heads h JOIN replicas r ON r.num = h.replica"
                    )
                ) {
                    let replica = ReplicaID(bytes: [UInt8](row[0] as Data))!
                    heads[replica] = ChainHead(
                        replica: replica,
                        counter: UInt64(row[1] as Int64),
                        hash: [UInt8](row[2] as Data)
                    )
                }
                return heads
            }
        }
    }

    /// Merges a delta of signed ranges (docs/signed-changes.md, step 3): every range must carry
    /// its replica's signature; each is checked against what this replica verified of that
    /// replica's chain and the keys in `keys` (`ProvenanceCheck`) before anything is merged, and
    /// one that fails refuses the delta whole. A range above what this replica verified, or of a
    /// replica whose key is not known yet, is left out; `MergeResult.rangesNotTaken` names it,
    /// with the ranges whose loss claims did not hold, so that the sender is asked for them again.
    /// After the merge, the heads of the ranges that counted are kept, signatures and geneses
    /// included, so that this replica can send those ranges on, verifiably, as it got them.
    package func mergeSigned(_ delta: Delta, keys: [ReplicaID: [UInt8]]) async throws(StoreError) -> MergeResult {
        try await mergeSigned(Self.check(delta, signed: true), keys: keys)
    }

    /// The ranges a signed delta claims, for `ProvenanceCheck`; refused when one is not signed.
    private static func provenanceRanges(of delta: Delta) throws(StoreError) -> [ProvenanceCheck.Range] {
        var ranges: [ProvenanceCheck.Range] = []
        for range in delta.coverage {
            guard let signature = range.signature else {
                throw StoreError(.invalidDelta, "rejected a delta: its range of replica \(range.replica) is not signed")
            }
            ranges.append(
                .init(
                    replica: range.replica,
                    from: range.from,
                    through: range.through,
                    signature: signature,
                    genesis: range.genesis
                )
            )
        }
        return ranges
    }

    private var provenanceCheck: ProvenanceCheck {
        ProvenanceCheck(hasher: hasher) { SigningKey.verify($0.signature, of: $0.head.signedMessage, by: $1) }
    }

    /// Works out the chain's hashes over `checked`'s ranges (`ProvenanceCheck.folds`) ahead of its
    /// merge: from the heads this replica verified, or the later ones in `expected` (where the
    /// merges before it, still under way, lead each chain). A session does it beside the merge
    /// before, so that the merges, which run one at a time, only look the heads up. Returns the
    /// delta with them, and `expected` moved on to where this delta leads: only a guess (a merge
    /// uses a fold only where it starts at the head it finds).
    package func foldingAhead(
        _ checked: CheckedDelta,
        expected: [ReplicaID: ChainHead]
    ) throws(StoreError) -> (checked: CheckedDelta, expected: [ReplicaID: ChainHead]) {
        let delta = checked.delta
        guard !delta.coverage.isEmpty, let ranges = try? Self.provenanceRanges(of: delta) else {
            return (checked, expected)
        }
        var starts = try verifiedHeads()
        for (replica, head) in expected where head.counter > starts[replica]?.counter ?? 0 { starts[replica] = head }
        let leaves = checked.leaves ?? delta.changeLeaves(hasher: hasher, entryHashes: checked.entryHashes)
        var folded = checked
        folded.folds = provenanceCheck.folds(ranges, starts: starts, leaves: leaves)
        var after = expected
        for head in folded.folds.values where head.counter > after[head.replica]?.counter ?? 0 {
            after[head.replica] = head
        }
        return (folded, after)
    }

    /// `mergeSigned` of a delta checked beforehand (`check`, which a session runs on another thread).
    package func mergeSigned(
        _ checked: CheckedDelta,
        keys: [ReplicaID: [UInt8]]
    ) async throws(StoreError) -> MergeResult {
        let delta = checked.delta
        let ranges = try Self.provenanceRanges(of: delta)
        let check = provenanceCheck
        let verdicts: [ProvenanceCheck.Verdict]
        let verified = try verifiedHeads()
        let leaves = checked.leaves ?? delta.changeLeaves(hasher: hasher, entryHashes: checked.entryHashes)
        switch check.check(ranges, verified: verified, keys: keys, leaves: leaves, folded: checked.folds) {
        case .failure(let problem): throw StoreError(.invalidDelta, "rejected a delta: \(problem)")
        case .success(let found): verdicts = found
        }
        try checkAgainstVerified(leaves, coverage: delta.coverage, verified: verified)
        let leftOut = Set(zip(delta.coverage, verdicts).filter { $0.1 == .gap || $0.1 == .keyUnknown }.map(\.0.replica))
        let own = replica
        let kept = zip(delta.coverage, verdicts).compactMap { range, verdict -> KeptHead? in
            guard range.replica != own else { return nil }
            switch verdict {
            case .verified(let head): return KeptHead(range: range, head: head, bytes: Self.bytes(of: range, in: delta))
            case .known: return range.genesis.map { _ in KeptHead(range: range, head: nil, bytes: 0) }
            case .gap, .keyUnknown: return nil
            }
        }
        var result = try await merge(leftOut.isEmpty ? checked : checked.leavingOut(leftOut), keeping: kept)
        result.rangesNotTaken = leftOut.union(result.rangesNotTaken)
        return result
    }

    /// Changes a delta carries at counters this replica verified already (a range sent again, or
    /// one that starts below where this replica stands) are not checked by their range's
    /// signature, which covers only what lies above: each must be the very change this replica
    /// verified there, leaf for leaf (a live change and its stub share one leaf, so a change sent
    /// whole where this replica keeps its stub passes). Anything else is a change its writer
    /// never made, and refuses the delta whole.
    func checkAgainstVerified(
        _ leaves: ChangeLeaves,
        coverage: [Delta.Coverage],
        verified: [ReplicaID: ChainHead]
    ) throws(StoreError) {
        for replica in Set(coverage.map(\.replica)) {
            guard let head = verified[replica]?.counter, head > 0 else { continue }
            let below = leaves.of(replica).prefix { $0.counter <= head }
            guard let first = below.first?.counter, let last = below.last?.counter else { continue }
            let held = Dictionary(
                try chainLeaves(of: replica, from: first - 1, through: last).map { ($0.counter, $0.leaf) }
            ) { a, _ in a }
            for (counter, leaf) in below {
                let expected = held[counter] ?? ChangeLeaf.none(replica: replica, counter: counter, hasher: hasher)
                guard leaf == expected else {
                    throw StoreError(
                        .invalidDelta,
                        "rejected a delta: its change \(counter) of replica \(replica) is not the change this replica verified there"
                    )
                }
            }
        }
    }

    /// A verified range's head (nil: nothing new verified, only its genesis to keep) and about how
    /// many bytes its changes take.
    struct KeptHead {
        let range: Delta.Coverage
        let head: ChainHead?
        let bytes: Int
    }

    /// Keeps a verified range's head as this replica's latest of its replica (when its coverage
    /// counted), and as a point where this replica may cut the ranges it sends on. A range of one
    /// change (a live push) makes a point only where its origin made one (every 256th counter,
    /// and where the changes since the last point would pass 1 MiB), so that relaying a stream of
    /// pushes does not keep a point per change; a longer range is a batch its sender cut there.
    static func keep(_ kept: KeptHead, db: Database) throws {
        let range = kept.range
        guard let number = try number(of: range.replica, db),
            let covered = try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT counter FROM replicas WHERE num = ?"),
                arguments: [number]
            )
        else { return }
        if let genesis = range.genesis, UInt64(covered) >= genesis.counter {
            try db.execute(
                sql: "INSERT OR IGNORE INTO chain_points (dot, hash, signature) VALUES (?, zeroblob(32), ?)",
                arguments: [DotKey.key(number: number, counter: genesis.counter), Data(genesis.signature)]
            )
        }
        guard let head = kept.head, UInt64(covered) >= head.counter, let signature = range.signature.map({ Data($0) })
        else { return }
        let prior = try Row.fetchOne(
            db.cachedStatement(
                sql: "SELECT counter, hash, signature, bytes_since_point FROM chain_heads WHERE replica = ?"
            ),
            arguments: [number]
        )
        if let prior, UInt64(prior[0] as Int64) >= head.counter { return }
        var bytesSincePoint = 0
        var point = true
        if range.through - range.from == 1, head.counter % OwnChain.pointInterval != 0 {
            point = false
            let before: Int = prior.flatMap { UInt64($0[0] as Int64) == range.from ? $0[3] : nil } ?? 0
            if before > 0, before + kept.bytes > OwnChain.pointBytes, let prior, let priorSignature = prior[2] as Data?
            {
                // The origin cut before this change: keep the head before it as a point.
                try db.execute(
                    sql: "INSERT OR IGNORE INTO chain_points (dot, hash, signature) VALUES (?, ?, ?)",
                    arguments: [DotKey.key(number: number, counter: range.from), prior[1] as Data, priorSignature]
                )
                bytesSincePoint = kept.bytes
            } else {
                bytesSincePoint = before + kept.bytes
            }
        }
        try db.execute(
            sql:
                "INSERT OR REPLACE INTO chain_heads (replica, counter, hash, signature, bytes_since_point) VALUES (?, ?, ?, ?, ?)",
            arguments: [number, Int64(head.counter), Data(head.hash), signature, bytesSincePoint]
        )
        if point {
            try db.execute(
                sql: "INSERT OR IGNORE INTO chain_points (dot, hash, signature) VALUES (?, ?, ?)",
                arguments: [DotKey.key(number: number, counter: head.counter), Data(head.hash), signature]
            )
        }
    }

    /// About how many bytes the changes of a one-change range take (as `OwnChain` counts them).
    private static func bytes(of range: Delta.Coverage, in delta: Delta) -> Int {
        guard range.through - range.from == 1 else { return 0 }
        let dot = Dot(replica: range.replica, counter: range.through)
        if let entry = delta.entries.first(where: { $0.dot == dot }) { return entry.byteEstimate }
        if let write = delta.preferences.first(where: { $0.dot == dot }) { return write.byteEstimate }
        if let stub = delta.preferenceStubs.first(where: { $0.dot == dot }) { return stub.byteEstimate }
        if let change = delta.rows.first(where: { $0.dot == dot }) {
            return change.byteEstimate(lost: delta.lostCells[dot] ?? [])
        }
        return 0
    }
}

extension CheckedDelta {
    /// The delta without the changes and ranges of `replicas` (ranges a signed merge leaves for later).
    package func leavingOut(_ replicas: Set<ReplicaID>) -> CheckedDelta {
        var delta = delta
        var hashes: [[UInt8]] = []
        hashes.reserveCapacity(entryHashes.count)
        for (entry, hash) in zip(delta.entries, entryHashes) where !replicas.contains(entry.dot.replica) {
            hashes.append(hash)
        }
        let firstRows =
            firstRows.isEmpty ? [] : zip(delta.rows, firstRows).filter { !replicas.contains($0.0.dot.replica) }.map(\.1)
        delta.entries.removeAll { replicas.contains($0.dot.replica) }
        delta.preferences.removeAll { replicas.contains($0.dot.replica) }
        delta.preferenceStubs.removeAll { replicas.contains($0.dot.replica) }
        delta.rows.removeAll { replicas.contains($0.dot.replica) }
        delta.lostCells = delta.lostCells.filter { !replicas.contains($0.key.replica) }
        delta.coverage.removeAll { replicas.contains($0.replica) }
        return CheckedDelta(delta: delta, entryHashes: hashes, firstRows: firstRows)
    }
}

/// Whether local commits extend the chain themselves (`extendChainInCommits`), and two counts
/// that tell whether the chain covers every write the store knows of (`chainCoversKnownWrites`).
final class ChainCoverage: Sendable {
    /// The most changes the chain may lag behind for a local commit to extend it itself: an
    /// append or an app's transaction of a few rows, not a bulk insert.
    static let limit: UInt64 = 64
    let extendsInCommits = Atomic<Bool>(false)
    /// Writes whose changes the chain may not cover, counted after they commit: local commits
    /// that did not extend it, and other processes' writes. It starts at one for whatever was
    /// written before the store opened.
    let uncovered = Atomic<Int>(1)
    /// `uncovered` as the latest `extendOwnChain` read it before it started: each write counted
    /// up to there is covered.
    let covered = Atomic<Int>(0)

    /// Counts a committed transaction of local writes that the chain may not cover.
    func committed(coveringChain: Bool) {
        if !coveringChain { uncovered.add(1, ordering: .releasing) }
    }
}

/// A flag that copies of one store, or threads, share.
package final class SharedFlag: Sendable {
    private let stored: Atomic<Bool>

    package init(_ value: Bool) { stored = Atomic(value) }

    package var value: Bool {
        get { stored.load(ordering: .acquiring) }
        set { stored.store(newValue, ordering: .releasing) }
    }
}
