-- The game platform with a 100-day curriculum (../shared/seeds/003_…). Its keyed progress
-- (`game.<id>.progress`, `game.<id>.level.<level>`) becomes rows keyed the same way on every
-- device; play counts and totals are counters, so plays on two devices add up; high scores,
-- stars, the curriculum day and the longest streak only go up and best times and first
-- completions only down (`max`, `min`), so a later, worse play on another device never replaces
-- them; analytics events are append-only. Dates are ms since the epoch; sets and maps the app
-- keeps as JSON text (docs/app-table-patterns.md shows them as one row per member).

CREATE TABLE game_progress (
    game_id TEXT NOT NULL,
    player_id TEXT NOT NULL DEFAULT 'default',
    levels_completed TEXT NOT NULL DEFAULT '[]',      -- JSON array of level ids
    achievements TEXT NOT NULL DEFAULT '[]',          -- JSON array
    total_play_time_ms INTEGER NOT NULL DEFAULT 0,
    total_sessions INTEGER NOT NULL DEFAULT 0,
    perfect_score_count INTEGER NOT NULL DEFAULT 0,
    favorite_level TEXT,
    last_played INTEGER,
    PRIMARY KEY (game_id, player_id)
);
-- lansync: counter game_progress.total_play_time_ms
-- lansync: counter game_progress.total_sessions
-- lansync: counter game_progress.perfect_score_count

CREATE TABLE level_scores (
    game_id TEXT NOT NULL,
    player_id TEXT NOT NULL DEFAULT 'default',
    level_id TEXT NOT NULL,
    high_score INTEGER NOT NULL DEFAULT 0,
    stars INTEGER NOT NULL DEFAULT 0 CHECK (stars BETWEEN 0 AND 3),
    best_completion_time_ms INTEGER,
    first_completed_date INTEGER,
    play_count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (game_id, player_id, level_id)
);
-- lansync: counter level_scores.play_count
-- lansync: max level_scores.high_score
-- lansync: max level_scores.stars
-- lansync: min level_scores.best_completion_time_ms
-- lansync: min level_scores.first_completed_date

-- lansync: append-only game_sessions
CREATE TABLE game_sessions (
    session_id TEXT PRIMARY KEY,
    game_id TEXT NOT NULL,
    start_time INTEGER NOT NULL,
    end_time INTEGER,
    cv_event_count INTEGER NOT NULL DEFAULT 0,
    error_count INTEGER NOT NULL DEFAULT 0
);

-- lansync: append-only analytics_events
CREATE TABLE analytics_events (
    event_id TEXT PRIMARY KEY,
    event_type TEXT NOT NULL,
    game_id TEXT NOT NULL,
    session_id TEXT,
    timestamp INTEGER NOT NULL,
    parameters TEXT NOT NULL DEFAULT '{}'             -- JSON object
);
CREATE INDEX analytics_events_by_game ON analytics_events(game_id, timestamp);

CREATE TABLE curriculum_progress (
    curriculum_id TEXT NOT NULL,
    player_id TEXT NOT NULL DEFAULT 'default',
    enrollment_date INTEGER NOT NULL DEFAULT 0,
    current_day INTEGER NOT NULL DEFAULT 1 CHECK (current_day BETWEEN 1 AND 100),
    current_streak INTEGER NOT NULL DEFAULT 0,
    longest_streak INTEGER NOT NULL DEFAULT 0,
    skill_mastery TEXT NOT NULL DEFAULT '{}',         -- JSON: skill id → progress
    PRIMARY KEY (curriculum_id, player_id)
);
-- lansync: max curriculum_progress.current_day
-- lansync: max curriculum_progress.longest_streak

-- One row per completed day; a parent's note on a day is edited later, so this table is mutable.
CREATE TABLE day_progress (
    curriculum_id TEXT NOT NULL,
    player_id TEXT NOT NULL DEFAULT 'default',
    day INTEGER NOT NULL CHECK (day BETWEEN 1 AND 100),
    completion_date INTEGER,
    total_duration_ms INTEGER NOT NULL DEFAULT 0,
    mastery_achieved INTEGER NOT NULL DEFAULT 0,
    retry_count INTEGER NOT NULL DEFAULT 0,
    parent_notes TEXT,
    PRIMARY KEY (curriculum_id, player_id, day)
);
-- lansync: counter day_progress.retry_count

-- lansync: append-only activity_results
CREATE TABLE activity_results (
    id TEXT PRIMARY KEY,
    curriculum_id TEXT NOT NULL,
    player_id TEXT NOT NULL DEFAULT 'default',
    day INTEGER NOT NULL,
    activity_id TEXT NOT NULL,
    start_time INTEGER NOT NULL,
    end_time INTEGER NOT NULL,
    score TEXT NOT NULL,                              -- JSON
    cv_events_processed INTEGER NOT NULL DEFAULT 0
);
