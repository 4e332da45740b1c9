-- Sample source database for Debezium (the server runs with wal_level=logical, see docker-compose.yml).
CREATE SCHEMA inventory;
SET search_path TO inventory;

CREATE TABLE customers (
  id          SERIAL PRIMARY KEY,
  first_name  VARCHAR(255) NOT NULL,
  last_name   VARCHAR(255) NOT NULL,
  email       VARCHAR(255) NOT NULL UNIQUE,
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE products (
  id          SERIAL PRIMARY KEY,
  name        VARCHAR(255) NOT NULL,
  description TEXT,
  price       NUMERIC(10, 2) NOT NULL,
  weight      DOUBLE PRECISION
);
CREATE TABLE orders (
  id          SERIAL PRIMARY KEY,
  order_date  DATE NOT NULL,
  purchaser   INTEGER NOT NULL REFERENCES customers (id),
  quantity    INTEGER NOT NULL,
  product_id  INTEGER NOT NULL REFERENCES products (id)
);
-- Full before-images for updates/deletes (Debezium "before" field).
ALTER TABLE customers REPLICA IDENTITY FULL;
ALTER TABLE products REPLICA IDENTITY FULL;
ALTER TABLE orders REPLICA IDENTITY FULL;

INSERT INTO customers (first_name, last_name, email) VALUES
  ('Sally', 'Thomas', 'sally.thomas@acme.com'), ('George', 'Bailey', 'gbailey@foobar.com'),
  ('Edward', 'Walker', 'ed@walker.com'), ('Anne', 'Kretchmar', 'annek@noanswer.org');
INSERT INTO products (name, description, price, weight) VALUES
  ('scooter', 'Small 2-wheel scooter', 39.90, 3.14), ('car battery', '12V car battery', 89.00, 8.1),
  ('hammer', '12oz carpenter''s hammer', 12.50, 0.75);
INSERT INTO orders (order_date, purchaser, quantity, product_id) VALUES
  ('2024-01-16', 1, 1, 1), ('2024-01-17', 2, 2, 2), ('2024-02-19', 2, 2, 3), ('2024-02-21', 3, 1, 2);

-- The connector's login: replication + read on the schema (publication created by the connector, "filtered").
CREATE ROLE debezium WITH LOGIN REPLICATION PASSWORD 'debezium';
GRANT USAGE ON SCHEMA inventory TO debezium;
GRANT SELECT ON ALL TABLES IN SCHEMA inventory TO debezium;
GRANT CREATE ON DATABASE inventory TO debezium;
ALTER TABLE customers OWNER TO debezium;
ALTER TABLE products OWNER TO debezium;
ALTER TABLE orders OWNER TO debezium;
