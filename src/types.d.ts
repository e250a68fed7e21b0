// Text imports embedded by Bun (migrations, OpenAPI document).
declare module "*.sql" {
  const text: string;
  export default text;
}
declare module "*.yaml" {
  const text: string;
  export default text;
}
