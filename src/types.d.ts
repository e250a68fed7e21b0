// Text imports embedded by Bun (migrations, OpenAPI document, console page).
declare module "*.sql" {
  const text: string;
  export default text;
}
declare module "*.yaml" {
  const text: string;
  export default text;
}
declare module "*.html" {
  const text: string;
  export default text;
}
