-- The golden schema-v1 kernel cache (tests/data/cache_v1.db), as an older mpk wrote it.
-- Regenerate: rm -f cache_v1.db && sqlite3 cache_v1.db < cache_v1.sql
-- Keys 1 and 2 are key_digest(make_key(100, "sm_90a")) and key_digest(make_key(101, "sm_90"))
-- from tests/cache/test_util.h; the third is an entry whose key format is unknown.
PRAGMA application_id = 1836084067;
CREATE TABLE kernels (
  key TEXT PRIMARY KEY NOT NULL,
  checksum TEXT NOT NULL,
  params TEXT NOT NULL,
  time_us REAL,
  verification TEXT NOT NULL,
  host TEXT NOT NULL,
  created INTEGER NOT NULL,
  mpk_version TEXT NOT NULL,
  blob BLOB NOT NULL
);
INSERT INTO kernels VALUES ('7f413bc1a6853f7baccf5cf26f2bc5cd1083e7bb1965b0357258ee09aad214f5', 'b48c5caccb1bb2c8e5f1dd79c26c40f265c86c7a449d9e7430119e0f09797ee2', '{"tile":64}', 12.5, '{"passed":true,"rel_l2":2e-4}', 'builder-a', 1690000000, '0.0.9', X'7f454c46020101330000000000000000000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f');
INSERT INTO kernels VALUES ('832b22a113b2bfdbb2379e170ac1f982b50fe08f5d280aef230a8e4db2ec4559', 'c120257de421da3c66681577906e682512b38b09563fa475ac7611c563c116cf', '{"tile":128,"split_k":2}', NULL, '{"passed":true}', 'builder-b', 1690000100, '0.0.9', X'7f454c460201013300000000000000006465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f90919293');
INSERT INTO kernels VALUES ('c49fea7425fa7f8699897a97c159c6690267d9003bb78c53fafa8fc15c325d84', '6425a1176ec319b3f6586f3d2062dab33295c1fe1f2ca48c100d9c1bff34edc7', '{}', 3.0, '{"passed":false}', 'builder-a', 1690000200, '0.0.8', X'6c656761637920637562696e2066726f6d20616e206f6c64206d706b');
PRAGMA user_version = 1;
